"""What a user message asks for, judged from its wording alone.

- historical intent: the user points at earlier conversation ("what did we decide", "last time",
  "remind me", "as you said", quoting earlier words). A positive signal, never a prerequisite.
- current state: the answer lives in the working tree or the running system now (what a file
  contains, whether tests pass, the current branch); history must not stand in for it.
- general knowledge: a textbook question with nothing of this project in it.
- time direction: whether it asks for the latest of several statements or the earliest.
- asks when: whether it asks for a time ("when did we …", "which year …").
- names: the words it writes as a person's name (capitalized mid-sentence), which the ranker
  matches against a transcript's speakers.
- answer words: words the statement answering it likely holds though the question does not (a
  change for a question about the latest state, a fix for one about how a problem was solved; in
  the user's own text, a preference or a standing rule for one about what the user said they
  like or want).

Plain regular expressions: preflight runs on every message and must stay cheap and deterministic.
Each is compiled on first use: a one-shot search asks only for the time direction, and need not
compile the others (`python -X importtime -m cwa call search` shows what importing costs).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

_FLAGS = re.IGNORECASE | re.VERBOSE


@functools.cache
def _regex(source: str) -> re.Pattern[str]:
    return re.compile(source, _FLAGS)


_HISTORICAL = r"""
    \b(earlier|previously|last\s+time|the\s+other\s+day|a\s+while\s+(ago|back)|back\s+when
       |yesterday|last\s+(week|month|session|sprint|year)|originally|at\s+first|in\s+the\s+past
       |(days|weeks|months)\s+ago|before\s+(now|that))\b
    | \bremind\s+me\b
    | \b(do|did|can|could)\s+you\s+(still\s+)?(remember|recall)\b
    | \bremember\s+(when|what|how|why|that|the|our|which|where)\b
    | \b(i|we)\s+(can'?t|cannot|don'?t)\s+(remember|recall)\b
    | \b(what|which|why|how|where|when|who)\b[^.?!]{0,40}?\b(did|had)\s+(we|you|i)\b
    | \bdid\s+(we|you)\s+(ever|already)\b
    | \b(we|you|i)\s+(had\s+|have\s+)?(discussed|talked\s+about|decided|agreed|mentioned|said|chose
       |settled\s+on|went\s+with|tried|proposed|suggested|planned|concluded|used\s+to|told\s+me
       |wrote|called\s+it|came\s+up\s+with|looked\s+at|figured\s+out|ruled\s+out|rejected)\b
    | \b(we'?d|you'?d)\s+(decided|agreed|discussed|talked|said|chosen|planned|mentioned)\b
    | \b(as|like)\s+(we|you|i)\s+(said|discussed|agreed|decided|mentioned|planned)\b
    | \bwhat\s+was\s+(the|that|our)\s+(decision|plan|idea|reason|conclusion|name|approach|outcome)\b
    | \bgo(ing)?\s+back\s+to\b
    | \bthe\s+(decision|discussion|conversation|plan|idea|approach)\s+(we|you)\b
    | \b(our|the)\s+(earlier|previous|last|prior|old|original)\s+(discussion|conversation|chat|session
       |decision|plan|idea|approach|attempt|fix|design|version)\b
    | \b(previous|prior)\s+(session|conversation|discussion|chat)s?\b
    | \bwe\s+(were|had\s+been)\s+(talking|discussing|working|looking)\b
    | \byou\s+were\s+saying\b
    | \bwhat\s+were\s+(we|you)\b
    | \bhave\s+(we|you)\s+(ever\s+|already\s+)?(discussed|talked|decided|tried|used|seen|considered)\b
    | \b(was|were)\s+(decided|agreed|discussed|chosen|settled|mentioned|proposed)\b
    | \bfrom\s+(before|last\s+time|earlier)\b
    | \b(didn'?t|did\s+not|haven'?t|have)\s+(we|you|i)\s+(already\s+|ever\s+)?(talk|discuss|decide|agree
       |mention|say|try|use|settle|pick|choose|look)
    | \bas\s+(mentioned|discussed|agreed|decided|noted|planned)\b
    | \b(we|you)\s+(saw|hit|ran\s+into|ended\s+up|fixed|found|changed|built|added|removed|picked)\b
    """

# Quoting someone's earlier words: a quoted phrase of three or more words. (Like every pattern
# here it is compiled with _FLAGS; it has neither letters nor spaces for them to change.)
_QUOTED_PHRASE = r"[\"“”「]([^\"“”「」\n]{3,200})[\"“”」]"

_CURRENT_STATE = r"""
    \b(right\s+now|currently|at\s+the\s+moment|at\s+present|as\s+of\s+(now|today)|as\s+it\s+stands)\b
    | \bnow\s*\?+\s*$
    | \b(do|does|are|is)\s+(all\s+)?(the\s+|our\s+)?(unit\s+|integration\s+|e2e\s+)?(tests?|specs?|build
       |ci|pipeline|lint|linter|checks?|type\s*checks?)\s+(still\s+)?(pass|passing|green|red|fail
       |failing|broken|succeed|succeeding|clean|running)\b
    | \b(current|which|what)\s+(git\s+)?branch\b
    | \bbranch\s+(am\s+i|are\s+we)\s+on\b
    | \bgit\s+(status|diff|log|branch)\b
    | \bwhat('?s|\s+is)\s+(in|inside)\s+\S
    | \bwhat\s+(does|do)\s+\S+(\s+\S+){0,3}\s+(contain|look\s+like|say|return|print|output|export|define)s?\b
    | \bwhat\s+does\s+\S+(\s+\S+){0,3}\s+do\b
    | \b(contents?)\s+of\b
    | \b(uncommitted|unstaged|staged|local)\s+changes\b
    | \b(is|are)\s+(the\s+)?\S+\s+(still\s+)?(installed|running|up|down|deployed|available|enabled
       |configured|live)\b
    | \b(does|do)\s+(it|this|that|the\s+\S+)\s+(still\s+)?(compile|build|work|run|pass)\s*\?*\s*$
    | \b(latest|current|head)\s+commit\b
    | \bwhere\s+(is|are)\s+\S+\s+(defined|declared|implemented|used|called|configured|set)\b
    | \bhow\s+many\s+\S+\s+(are|is)\s+there\b
    | \bwhat\s+version\s+of\b
    | \b(show|print|cat|open|read|list|display)\s+(me\s+)?(the\s+)?(current\s+|latest\s+)?(contents?
       |file|files|directory|folder|diff|status|tree)\b
    | \b(does|do|is|are)\s+\S+(\s+\S+){0,4}\s+still\b[^.!]*\?
    | \bthe\s+current\s+(state|version|value|contents?|code|implementation|config|configuration
       |setting|status|output)\b
    """

_GENERAL = r"""
    ^\s*(what|who)('?s|\s+is|\s+are|\s+was|\s+were)\s+(a|an)\s
    | ^\s*what\s+(is|are)\s+(?!the\b|this\b|that\b|these\b|those\b|our\b|my\b|your\b|it\b)
      (?-i:[a-z]+([\s-][a-z]+)?)\s*\?*\s*$
    | ^\s*(explain|define|describe)\s+(what|how|why|the\s+(difference|concept|idea)|a|an)\b
    | \b(in\s+general|generally\s+speaking|in\s+theory)\b
    | ^\s*how\s+(does|do)\s+(a\s+|an\s+)?[\w-]+(\s+[\w-]+){0,2}\s+work\s*\?*\s*$
    | \bdifference\s+between\b
    | \bwhat\s+does\s+\S+\s+stand\s+for\b
    """

# Words that tie a question to this project or conversation: then it is not general knowledge.
_PROJECT_REFERENCE = r"\b(we|our|us|my|this|here|project|repo|repository|codebase|app|service)\b|[/`]"

# Wording that asks for the latest of several statements, or for the earliest: the learned ranker
# weighs a candidate's place in time only when one of them is present (cwa/retrieve/ranker.py,
# `timeFit`).
_LATEST = r"""
    \b(now|nowadays|currently|current|these\s+days|at\s+(this|that)\s+point|at\s+the\s+moment|at\s+present
       |as\s+of\s+(now|today)|latest|most\s+recent(ly)?|final(ly)?|in\s+the\s+end|end(ed)?\s+up
       |any\s*more|no\s+longer|still|so\s+far|instead|switch(ed)?\s+to|chang(e|ed)\s+to|replaced?)\b
    """
# Words a statement of change holds ("switched to", "replaced … with", "moved … to", "no longer"):
# a question about the latest state ("what does X use now") is answered by the last statement
# that changed it, which may share nothing with the question but its subject; for such a question
# search also fetches the subject's windows holding one of these (cwa/retrieve/search.py).
CHANGE_WORDS = (
    "switch swap replace move migrate change update upgrade revert convert instead drop stop abandon adopt "
    "longer anymore"
).split()
# Wording that asks how a problem was solved or what caused it ("how did we fix …", "what was the
# root cause of …", "how did we get rid of …"), and the words of the statement that answers it
# ("fixed: …", "the cause was …", "the patch makes …"): that statement names the remedy and the
# cause, often not the problem's own words, which the error it fixed held.
_RESOLUTION = r"""
    \b(fix(ed|es|ing)?|solv(e|ed|es|ing)|resolv(e|ed|es|ing)|repair(ed|s|ing)?|patch(ed)?|work(ed)?\s*around
       |workaround|(get|got|gotten)\s+rid\s+of|root\s+causes?|caus(ed|ing)|cause\s+of|culprit
       |(what|who)\s+(was|is|were|are)\s+behind)\b
    """
FIX_WORDS = "fix cause root patch resolve solve repair workaround culprit".split()
# Wording that asks what the user said they like, want or require ("do I like", "my stance on",
# "what did I ask for", "according to me", "the rule for"): the answer is the user's own statement
# of a preference or a standing rule, which often names its subject in other words than the
# question and holds one of STANCE_WORDS, in the user's text (not the assistant's or a tool's).
_OWN_STANCE = r"""
    \bmy\s+(stance|view|views|preference|preferences|take|opinion|position|rule|rules|style|taste|convention)\b
    | \b(do|did|would)\s+i\s+(like|prefer|want|favou?r|love|hate|dislike|ask|say|insist|request|specify)\b
    | \b(have|had)\s+i\s+(said|asked|told\s+you|mentioned|requested)\b
    | \baccording\s+to\s+me\b
    | \b(standing|house)\s+(rule|instruction|order)s?\b
    | \b(the|a|any|my)\s+rule\s+(about|for|on|when)\b
    """
STANCE_WORDS = "prefer rather like want love hate favour favor always never please keep avoid must rule insist".split()
_EARLIEST = r"""
    \b(first|initially|originally|at\s+the\s+(start|beginning)|in\s+the\s+beginning|earliest
       |to\s+begin\s+with|began|begin|started)\b
    """

# Wording of historical intent that says nothing about the topic: left out of preflight's query.
HISTORICAL_WORDS = """earlier previously last time ago remind remember recall discuss discussed
talked talk decide decided agree agreed mention mentioned said say told chose choose settled
before originally yesterday week back saw didn haven already suggested suggest""".split()

# The unit a question wants its answer in ("on which day", "what year"): it names what is asked,
# not the subject; a source is no likelier the one meant for holding the word (a turn's date is
# its time, seldom a word of it), and one that holds it in passing ("the day after the deploy")
# would back a hint on that word alone.
_ANSWER_UNIT = r"""
    \b(?:(?:on|in|at|by)\s+(?:which|what)\s+(day|date|week|month|year|time)s?\b
       |(?:which|what)\s+(day|date|week|month|year|time)s?
        \s+(?:did|do|does|was|were|is|are|will|would|has|have|had|should|can|could)\b)
    """

# Asking when something happened: "when" opening a question, not joining two clauses ("broke
# when we …"); a question naming its answer's unit ("which year …") asks it too (asks_when).
_ASKS_WHEN = r"""
  \bwhen \s+ (?:did|do|does|was|were|is|are|will|would|have|has|had|can|could)\b
| \bhow \s+ long \s+ ago\b | \bsince \s+ when\b
"""
# Wording about what was asked earlier: there a source's own question is the one wanted. A
# question the message puts now ("quick question: …", "can I ask …", "I have a question about
# …", "my question is …") is not one.
_ABOUT_ASKING = r"""
    \b(?:asked|asking)\b
    |\b(?:did|do|does|didn't|don't|doesn't)\s+\w+\s+ask\b
    |\b(?:which|what|whose)\s+questions?\b
    |\bquestions?\s+(?:i|you|we|he|she|they)\b
    |\b(?:my|your|our|his|her|their|that|those)\s+(?:earlier\s+|last\s+|previous\s+|first\s+)?questions?\b(?!\s+is\b)
    """


def historical_intent(message: str) -> bool:
    if _regex(_HISTORICAL).search(message):
        return True
    return any(len(m.group(1).split()) >= 3 for m in _regex(_QUOTED_PHRASE).finditer(message))


def current_state_only(message: str) -> bool:
    """About the present state of files, tests, branch or system, and not about history."""
    return not historical_intent(message) and bool(_regex(_CURRENT_STATE).search(message))


def general_knowledge(message: str) -> bool:
    """A textbook question with no reference to this project or conversation."""
    if historical_intent(message) or _regex(_PROJECT_REFERENCE).search(message):
        return False
    return bool(_regex(_GENERAL).search(message.strip()))


@dataclass(frozen=True)
class AnswerWords:
    """Words a statement answering a question likely holds beside its subject: `anywhere` in it,
    `user` in the user's own text."""

    anywhere: tuple[str, ...] = ()
    user: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.anywhere or self.user)


NO_ANSWER_WORDS = AnswerWords()


def answer_words(message: str, direction: float) -> AnswerWords:
    """The words a statement answering the message likely holds beside its subject: a change's
    for a question about the latest state (`direction`, its `time_direction`, is 1.0), a fix's for
    one about how a problem was solved, and in the user's own text a preference's or a rule's for
    one about what the user said they like or want."""
    anywhere: tuple[str, ...] = ()
    if direction > 0:
        anywhere += tuple(CHANGE_WORDS)
    if asks_for_fix(message):
        anywhere += tuple(FIX_WORDS)
    user = tuple(STANCE_WORDS) if asks_own_words(message) else ()
    return AnswerWords(anywhere, user)


def asks_own_words(message: str) -> bool:
    """Whether the message asks what the user (its writer) said they like, want or require: its
    answer is the user's own statement ("what is my stance on …", "did I ask for …")."""
    return _regex(_OWN_STANCE).search(message) is not None


def answer_unit_words(message: str) -> tuple[str, ...]:
    """The units the message asks its answer in ("On which day did we …": `day`), each once."""
    return tuple(dict.fromkeys((m.group(1) or m.group(2)).lower() for m in _regex(_ANSWER_UNIT).finditer(message)))


def about_asking(message: str) -> bool:
    """Whether the message is about what was asked ("what did I ask about the budget?", "which
    question …"): a source's question is then what it wants, not a question to be answered."""
    return bool(_regex(_ABOUT_ASKING).search(message))


def asks_for_fix(message: str) -> bool:
    """Whether the message asks how a problem was solved or what caused it: only a statement of the
    fix answers it (one that holds FIX_WORDS), not the problem's own report."""
    return bool(_regex(_RESOLUTION).search(message))


def asks_when(message: str) -> bool:
    """Whether the message asks when something happened ("when did we switch …", "which year …"):
    the statement answering it likely mentions a time."""
    return bool(_regex(_ASKS_WHEN).search(message) or answer_unit_words(message))


def time_direction(message: str) -> float:
    """1.0 when the message asks for the latest state ("what do we use now"), -1.0 for the
    earliest ("when did it first fail"), 0.0 for neither or both."""
    latest, earliest = bool(_regex(_LATEST).search(message)), bool(_regex(_EARLIEST).search(message))
    return float(latest) - float(earliest)


# A name as people write one: a capital then a lower-case letter ("Caroline", "Caroline's"); not
# "I", "API" or "JSON". Case matters, so not one of the IGNORECASE patterns above.
_NAME = re.compile(r"(?<![\w'’])[A-Z][a-z][\w'’-]*")
_SENTENCE_END = ".!?:;\n"
_OPENING_MARKS = " \t\"'“‘(*_"


def names(message: str) -> tuple[str, ...]:
    """The words the message writes as names: capitalized where a sentence does not open (any
    sentence's first word is capitalized, "Summary of …" names nobody). Lower-cased text names
    no one: a guess from case alone would take "summary" for the speaker of "Summary: …"."""
    found = []
    for match in _NAME.finditer(message):
        before = match.start() - 1  # the last character before it that is not a space or a quote
        while before >= 0 and message[before] in _OPENING_MARKS:
            before -= 1
        if before >= 0 and message[before] not in _SENTENCE_END:
            found.append(match.group())
    return tuple(found)


@dataclass(frozen=True)
class Cues:
    """What the ranker reads of a query's wording: its time direction, the words it writes as
    names, and whether it asks when."""

    direction: float = 0.0
    names: tuple[str, ...] = ()
    asks_when: bool = False


NO_CUES = Cues()


def cues(message: str) -> Cues:
    """The ranker's cues of a message (or a search query)."""
    return Cues(time_direction(message), names(message), asks_when(message))
