from cwa.launch import main

main()
