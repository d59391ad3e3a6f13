from cwa.cli import main

main()
