"""ZoFia's roles, each with its prompt next to its output model (paper Appendix B gives the prompts).

Stage 1 has one LLM role, ``zofia.entities`` (Table 3's "Only-LLM NER", used with ``ner=llm``, or
with ``ner=auto`` when no supervised model is installed). Stage 2 has the collaboration agents (§4.1:
``zofia.linguist``, one isolated call
per dimension; ``zofia.expert_triage`` then ``zofia.expert``; ``zofia.claim_extractor`` then one
``zofia.claim_verifier`` call per claim) and the debate (§4.2, Algorithm 1: ``zofia.pro``, ``zofia.con``
and ``zofia.judge``). The "w/o Debate" ablation asks the judge once for a direct ruling: a separate
declared role, :data:`DIRECT_JUDGE`, with its own prompt and output model but the same role name
``zofia.judge`` the model and the trace see (so ``--param judge.max_tokens=N`` sets both judges).
:data:`ROLES` lists each role name once, so it holds :data:`JUDGE` only; JUDGE's description names the
ablation's variant.

The debaters keep a conversation each: the method starts it with :meth:`Role.messages`, appends one
user turn (:func:`pro_turn` / :func:`con_turn`) and one assistant turn (the debater's argument) per round,
and passes it as ``messages=``.

Budgets: the agents and the judges 256 tokens, the entity extractor 512 (its list of up to 10 entities),
the debaters 1200. The paper's main runs (§5.1) state no output limit; §5.6 (Fig. 4) caps output tokens
from 400 ("ZoFia cannot complete full reasoning below 400 tokens") to 1200, where ZoFia's F1 was still
rising, so the debaters, whose rebuttal and evidence are the longest replies (Appendix C), get 1200 and
their schema's length bounds leave room for it.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field

from veracity.pipeline.grounding import QUOTE_RETRY, quoted
from veracity.pipeline.roles import Fallback, Role, Turn, format_passages
from veracity.pipeline.types import Evidence

Message = dict[str, str]

AGENT_MAX_TOKENS = 256  # the collaboration agents and the judge
DEBATE_MAX_TOKENS = 1200  # the pro / con debaters (§5.6, Fig. 4: the largest budget the paper reports)

LINGUIST_DIMENSIONS = ("Sentence", "Word", "Grammar", "Emotion", "Information Quality")


def _user(text: str) -> list[Message]:
    return [{"role": "user", "content": text}]


# -- role: zofia.entities (LLM fallback of the BERT-NER extractor, eq. 1) --------------------------
class ExtractedEntity(BaseModel):
    text: str = Field(max_length=60, description="the entity exactly as written in the text")
    type: Literal["PER", "ORG", "LOC", "MISC"]
    confidence: float = Field(description="probability between 0 and 1 that this is a correct named entity")


class ExtractedEntities(BaseModel):
    entities: list[ExtractedEntity] = Field(max_length=10)  # bounded so a reply fits max_tokens


ENTITIES_SYSTEM = (
    "You are a named entity recognizer (CoNLL-2003 types: PER person, ORG organization, LOC location, MISC "
    "other names such as events, nationalities, works). List every named entity of the text exactly as it "
    "is written there, with its type and your confidence between 0 and 1. Reply in JSON."
)


def entities_turn(text: str) -> list[Message]:
    return _user(f"Text: {text}")


ENTITIES = Role(
    "zofia.entities", output=ExtractedEntities, render=entities_turn, instructions=ENTITIES_SYSTEM,
    max_tokens=2 * AGENT_MAX_TOKENS,
    summary="lists the named entities of the text with confidences (ner=llm; ner=auto without a supervised "
            "model)",
    # the claim is still checked, without entity-guided retrieval (Algorithm 2: no entities -> empty set)
    fallback=Fallback(None, "no entities: entity-guided retrieval skipped", event="zofia.entities"),
    extra={"paper": "§3.1, eqs. 1-2; §5.4, Table 3 (Only-LLM NER)"},
)


# -- role: zofia.linguist (B.1; one isolated call per dimension) ----------------------------------
class LinguistAnalysis(BaseModel):
    analysis: str = Field(max_length=200, description="one direct analytical paragraph, at most 25 words")
    reflects: Literal["REAL", "FAKE"] = Field(description="whether this feature reflects real or fake news")


LINGUIST_SYSTEM = (
    "You are a linguistic analyst for a news channel, tasked with profiling articles to help detect fake "
    "news. Analyze the provided news text against these linguistic features of fake news:\n"
    "1. Sentence: longer sentences, simple words, and a more informal tone (e.g., expletives).\n"
    "2. Word: more superlatives, emotional or vague language, with fewer reporting verbs and 1st/2nd-person "
    "pronouns.\n"
    "3. Grammar: frequent use of reported speech, passive voice, and negation. Paraphrasing is less common.\n"
    "4. Emotion: a higher ratio of emotional words. Headlines are often sensational and designed to "
    "provoke readers.\n"
    "5. Information Quality: information overload or deficit, mismatched context, and more clickbait "
    "patterns.\n"
    "When given a feature name, analyze only that feature in a single paragraph of at most 25 words and "
    "say whether it reflects that the news is REAL or FAKE. Reply in JSON."
)


def linguist_turn(text: str, dimension: str, headline: str = "") -> list[Message]:
    """The Emotion dimension reads "the text and the headline" (§4.1.1, B.1): the headline, when the
    claim carries one (``Claim.meta["headline"]`` or ``["title"]``), comes before the text."""
    head = f"Headline: {headline}\n\n" if headline.strip() else ""
    return _user(f"{head}News text:\n{text}\n\nFeature: {dimension}")


# A reply that never validates leaves the whole linguist out of the evidence pool (the method's stage-2
# guard, traced as zofia.agent_failed), so the role itself declares no fallback.
LINGUIST = Role(
    "zofia.linguist", output=LinguistAnalysis, render=linguist_turn, instructions=LINGUIST_SYSTEM,
    max_tokens=AGENT_MAX_TOKENS,
    summary="analyses one linguistic dimension (5 isolated calls); an invalid reply leaves the linguist out",
    extra={"paper": "§4.1.1; B.1"},
    on_invalid="the linguist is left out of the evidence pool",
)


# -- role: zofia.expert_triage / zofia.expert (B.2) -------------------------------------------------
class ExpertTriage(BaseModel):
    domain: str = Field(max_length=60,
                        description="the most relevant domain of the news, e.g. economy, politics, "
                                    "entertainment")
    expert_role: str = Field(max_length=60,
                             description="a precise expert role for that domain, e.g. economist, journalist")


TRIAGE_SYSTEM = ("Identify the most relevant domain of the news text and the precise expert role best suited "
                 "to "
                 "fact-check it. Reply in JSON.")


def triage_turn(text: str) -> list[Message]:
    return _user(f"News text:\n{text}")


EXPERT_TRIAGE = Role(
    "zofia.expert_triage", output=ExpertTriage, render=triage_turn, instructions=TRIAGE_SYSTEM,
    max_tokens=AGENT_MAX_TOKENS,
    summary="picks the news domain and the expert role; an invalid reply leaves the expert out",
    extra={"paper": "§4.1.2"},
    on_invalid="the expert is left out of the evidence pool",
)


class ExpertAnalysis(BaseModel):
    knowledge_concordance: str = Field(max_length=300,
                                       description="rationality of the factual claims, viewpoints and "
                                                   "details; departures from common sense or sensationalism")
    logical_integrity: str = Field(max_length=300,
                                   description="coherence of arguments and conclusions; logical fallacies or "
                                               "unsupported inferences")


def expert_system(expert_role: str) -> str:
    """As a professional and renowned {expert_role}, fact-check the article on 2 aspects (Knowledge
    Concordance, Logical Integrity), with Wikipedia summaries of its key entities for reference. The
    expert's role comes from the triage (a journalist when it is blank)."""
    role = expert_role.strip() or "journalist"
    return (
        f"As a professional and renowned {role}, you are fact-checking a news article. Identify all "
        "sentences "
        "that can significantly affect the truthfulness of the news, and analyze the news from 2 aspects:\n"
        "1. Knowledge Concordance: analyze the rationality of all factual claims, viewpoints and details in "
        "the news text. Identify any content that deviates from common sense or exhibits sensationalism.\n"
        "2. Logical Integrity: analyze the coherence of the article's arguments and conclusions based on "
        "your "
        "field's reasoning principles. Identify any logical fallacies or unsupported inferences.\n"
        "Information from Wikipedia explains the key entities in the news (for reference only, not "
        "necessarily relevant). Together at most 100 words. Do not fabricate any information; base every "
        "analysis on the provided text. Reply in JSON."
    )


def expert_turn(text: str, wiki: list[Evidence]) -> list[Message]:
    """``wiki`` are the chosen Wikipedia entries (§3.4)."""
    wiki_text = "\n".join(f"- {e.title}: {e.text}" for e in wiki) or "(none)"
    return _user(f"News text:\n{text}\n\nInformation from Wikipedia:\n{wiki_text}")


EXPERT = Role(
    "zofia.expert", output=ExpertAnalysis, render=expert_turn, instructions=expert_system,
    max_tokens=AGENT_MAX_TOKENS,
    summary="the domain expert's Knowledge Concordance and Logical Integrity; an invalid reply leaves the "
            "expert out",
    extra={"paper": "§4.1.2; B.2"},
    on_invalid="the expert is left out of the evidence pool",
)


# -- role: zofia.claim_extractor (B.3, eq. 8) -------------------------------------------------------
class ExtractedClaims(BaseModel):
    core_claim: str = Field(max_length=200,
                            description="the claim that directly determines the truthfulness of the news")
    subclaims: list[Annotated[str, Field(max_length=160)]] = Field(max_length=4,
                                                                   description="2-4 supporting sub-claims, "
                                                                               "concise declarative "
                                                                               "sentences without pronouns")


CLAIM_EXTRACTOR_SYSTEM = (
    "You are a news fact-checker tasked with summarizing all factual claims within an article for "
    "subsequent verification. Read the article sentence by sentence. Identify its core claim (it directly "
    "determines the truthfulness of the news) and the supporting sub-claims strongly related to it. "
    "Paraphrase each claim into a concise, objective, declarative sentence. Merge strongly related claims "
    "into one. Do not use pronouns; write explicit nouns. Output 2-4 sub-claims most relevant to the core "
    "claim. Do not fabricate claims: all must come from the text. Reply in JSON."
)


def claim_extractor_turn(text: str) -> list[Message]:
    return _user(f"News article:\n{text}")


CLAIM_EXTRACTOR = Role(
    "zofia.claim_extractor", output=ExtractedClaims, render=claim_extractor_turn,
    instructions=CLAIM_EXTRACTOR_SYSTEM, max_tokens=AGENT_MAX_TOKENS,
    summary="the core claim and 2-4 sub-claims; an invalid reply leaves claim verification out",
    extra={"paper": "§4.1.3, eq. 8; B.3"},
    on_invalid="claim verification is left out of the evidence pool",
)


# -- role: zofia.claim_verifier (B.4, eq. 9) --------------------------------------------------------
class ClaimVerification(BaseModel):
    reasoning: str = Field(max_length=300, description="brief reasoning based only on the web information")
    label: Literal["SUPPORTS", "REFUTES", "NOT ENOUGH INFO"]
    quoted_evidence: list[Annotated[str, Field(max_length=200)]] = Field(max_length=3,
                                                                         description="sentences quoted from "
                                                                                     "the web information")


CLAIM_VERIFIER_SYSTEM = (
    "You are a professional news fact-checker skilled at logical reasoning and text analysis. Fact-check "
    "the given claim based on the provided web information: the most relevant sentences extracted by "
    "retrieval. Assume the web information is reliable and decide whether it sufficiently supports or "
    "refutes the claim, making full use of every piece of it. Answer SUPPORTS, REFUTES or NOT ENOUGH INFO, "
    "with brief reasoning and the evidence quoted from the web information. Do not fabricate anything. "
    "Reply in JSON."
)


def claim_verifier_turn(claim: str, context: list[tuple[str, Evidence]]) -> list[Message]:
    """``context``: C_rel(q) of eq. 9, the relevant chunks (text, the passage it comes from), best first."""
    info = "\n".join(f"- ({ev.title}) {chunk}" for chunk, ev in context)
    return _user(f"Web information:\n{info}\n\nClaim: {claim}")


CLAIM_VERIFIER = Role(
    "zofia.claim_verifier", output=ClaimVerification, render=claim_verifier_turn,
    instructions=CLAIM_VERIFIER_SYSTEM, max_tokens=AGENT_MAX_TOKENS,
    summary="verifies one claim from its relevant chunks (RAG, eq. 9); an invalid reply leaves claim "
            "verification out",
    extra={"paper": "§4.1.3, eq. 9; B.4"},
    on_invalid="claim verification is left out of the evidence pool",
)


# -- role: zofia.pro / zofia.con (B.5) ----------------------------------------------------------------
class DebateArgument(BaseModel):
    rebuttal: str = Field(max_length=1500,
                          description="one paragraph rebutting the opponent's evidence and reasons (empty at "
                                      "the start)")
    points: list[Annotated[str, Field(max_length=500)]] = Field(max_length=6,
                                                                description="new evidence, each: a statement "
                                                                            "summarizing the material, which "
                                                                            "material it comes from, and the "
                                                                            "reason")


NO_ARGUMENT = DebateArgument(rebuttal="", points=[])  # a debater whose reply never validated this round


def debater_system(side: str) -> str:
    return (
        "You are a debater in a debate about the truthfulness of a news article. "
        f"You argue that the news is {side}. Find the most persuasive supporting evidence in the provided "
        "material and back it up with concise reasons. You will receive evidence and reasons from the "
        "opposing debater: first rebut them in one paragraph, then give the most valuable new evidence with "
        "reasons. Each piece of evidence is a statement summarizing specific content of the material and "
        "says which material it comes from. Do not fabricate any information; base every point on the "
        "provided material. Reply in JSON."
    )


def debater_opening() -> list[Message]:
    """Nothing after the system message: a debater's conversation opens with its instructions only; the
    method appends one user turn (:func:`pro_turn` / :func:`con_turn`) and one assistant turn (the
    debater's argument) per round."""
    return []


def format_argument(a: DebateArgument) -> str:
    return (f"Rebuttal: {a.rebuttal}\n" if a.rebuttal.strip() else "") + "\n".join(f"- {x}" for x in a.points)


def _opening(pool: str, rnd: int) -> str:
    return f"Material:\n{pool}\n\n" if rnd == 1 else ""  # the evidence pool, once, in the first round


def pro_turn(pool: str, rnd: int, a_con: DebateArgument | None) -> Message:
    """Pro's user turn of round ``rnd``: Con's last argument (none before the first round)."""
    return {"role": "user", "content": _opening(pool, rnd) + (
        "Debate starts." if a_con is None else f"Con's arguments:\n{format_argument(a_con)}")}


def con_turn(pool: str, rnd: int, a_pro: DebateArgument) -> Message:
    """Con's user turn of round ``rnd``: Pro's argument of this round."""
    return {"role": "user", "content": _opening(pool, rnd) + f"Pro's arguments:\n{format_argument(a_pro)}"}


_SHOWN_ARGUMENT = DebateArgument(rebuttal="{rebuttal}", points=["{point}"])
PRO_ROUND = Turn("round", pro_turn, {"pool": "{pool}", "rnd": 2, "a_con": _SHOWN_ARGUMENT},
                 when="each round: Con's last argument (round 1 also opens with the material: "
                      "Material:\n{pool})")
CON_ROUND = Turn("round", con_turn, {"pool": "{pool}", "rnd": 2, "a_pro": _SHOWN_ARGUMENT},
                 when="each round: Pro's argument of the round (round 1 also opens with the material)")


PRO = Role(
    "zofia.pro", turns=(PRO_ROUND,), output=DebateArgument, render=debater_opening,
    instructions=debater_system("REAL"), max_tokens=DEBATE_MAX_TOKENS,
    summary="argues the news is real: rebuts Con's last argument, then gives new evidence",
    fallback=Fallback(NO_ARGUMENT, "no argument this round", agent="pro"),
    extra={"paper": "§4.2, Algorithm 1; B.5"},
)

CON = Role(
    "zofia.con", turns=(CON_ROUND,), output=DebateArgument, render=debater_opening,
    instructions=debater_system("FAKE"), max_tokens=DEBATE_MAX_TOKENS,
    summary="argues the news is fake: rebuts Pro's argument, then gives new evidence",
    fallback=Fallback(NO_ARGUMENT, "no argument this round", agent="con"),
    extra={"paper": "§4.2, Algorithm 1; B.5"},
)


# -- role: zofia.judge (B.6) ----------------------------------------------------------------------------
class DebateDecision(BaseModel):
    """B.6: "Just one character, don't output any other content or explanations": the ruling only."""
    decision: Literal["R", "F", "I"] = Field(description="R: Real, F: Fake, I: Continue")


RULING = {"R": "REAL", "F": "FAKE", "I": "CONTINUE"}  # the ruling's name in traces and verdicts
# quotes=show|check: the words of each passage the judge is shown (quotes are checked on the whole passage)
JUDGE_PASSAGE_WORDS = 120


# quotes=show|check (veracity's switch, not the paper's: B.6 asks for one character)
class QuotedDebateDecision(quoted(DebateDecision, "QuotedDebateDecision",  # type: ignore[misc]
                                  "with R or F: for each passage the ruling rests on, the words it rests on, "
                                  "copied exactly; with I: none")):

    @property
    def label(self) -> str:  # the ruling's name (traces, the retry's messages)
        return RULING[self.decision]


JUDGE_QUOTE = ("Reply in JSON: the character as decision and, when you rule R or F, for each passage your "
               "ruling "
               "rests on its id (shown in square brackets under Passages) and the words it rests on, copied "
               "exactly "
               "from it; with I, no quotes.")


def judge_system(max_rounds: int, quoting: bool = False) -> str:
    """Appendix B.6, the judge's prompt (the limit of rounds is ``max_debate_rounds``, 5 in the paper).
    ``quoting`` (quotes=show|check, veracity's switch): a ruling also quotes the passages it rests on, in
    place of B.6's "just one character"."""
    expectation = ("Output R or F only if you are quite confident. " + JUDGE_QUOTE if quoting else
                   "Just one character, don't output any other content or explanations. Do nothing else. "
                   "Output R or F only if you are quite confident. Reply in JSON: the character as decision.")
    return (
        "## Role\nYou are an extremely cautious and logically rigorous final judge. Your only task is to "
        "determine when sufficient evidence has been presented to make a final ruling (real or fake) in a "
        "debate about the truthfulness of news.\n\n"
        "## Instruction\nYou are moderating a debate on the authenticity of a news article. The two opposing "
        "sides (Pro/Con: arguing the news is real/fake) have already engaged in several rounds of debate. "
        "Now, you must review the existing debate record to assess whether there is sufficient evidence to "
        "end the debate. If there is, you will make a final judgment (real or fake); otherwise, instruct the "
        "debate to continue. Each received message is regarded as a debate round. Make the debate rounds as "
        f"many as possible, but no more than {max_rounds}.\n\n"
        "## Expectation\nRespond with the most accurate option below:\n\nR: Real\nF: Fake\nI: Continue\n\n"
        + expectation
    )


def _passages_block(passages: list[Evidence] | None) -> str:
    return (f"Passages:\n{format_passages(passages, max_words=JUDGE_PASSAGE_WORDS)}\n\n"
            if passages is not None else "")


def judge_turns(pool: str, history: list[tuple[DebateArgument, DebateArgument]],
                show_pool: bool = False, passages: list[Evidence] | None = None) -> list[Message]:
    """Algorithm 1's D <- Judge.Assess(H): one user message per debate round ("each received message is
    regarded as a debate round", B.6), the judge's earlier "I" between them; the evidence pool opens the
    first message only with ``show_pool`` (parameter ``judge_sees_pool``), and the passages retrieved (each
    with its id) only with ``passages`` (quotes=show|check, veracity's switch)."""
    messages: list[Message] = []
    for i, (a, b) in enumerate(history, 1):
        if i > 1:
            messages.append({"role": "assistant", "content": DebateDecision(decision="I").model_dump_json()})
        opening = (f"Material:\n{pool}\n\n" if show_pool and i == 1 else "") + (_passages_block(passages)
                                                                                if i == 1 else "")
        messages.append({"role": "user",
                         "content": f"{opening}= ROUND {i} =\nPro. arguments:\n{format_argument(a)}"
                                                    f"\n\nCon. arguments:\n{format_argument(b)}"})
    return messages


JUDGE = Role(
    "zofia.judge", turns=(QUOTE_RETRY,), output=DebateDecision, render=judge_turns, instructions=judge_system,
    max_tokens=AGENT_MAX_TOKENS, confidence="decision",
    summary="after each debate round one character: R (real), F (fake) or I (continue); still I after the "
            "last "
            "round: NOT_ENOUGH_INFO",
    # no ruling this round: another round, or INSUFFICIENT after the last one
    fallback=Fallback(DebateDecision(decision="I"), "the debate continues", agent="judge"),
    extra={"paper": "§4.2, Algorithm 1; B.6",
           "no_debate": "with no_debate: one ruling over the evidence pool instead, output DirectDecision "
                        "(REAL / FAKE); an invalid reply gives NOT_ENOUGH_INFO (see DIRECT_JUDGE)",
           "quotes": "with quotes=show|check (veracity's switch): the judge also reads the passages "
                     "retrieved and "
                     "an R / F ruling quotes those it rests on (QuotedDebateDecision; no_debate: "
                     "QuotedDirectDecision)"},
)


# -- role: zofia.judge, "w/o Debate" ablation (Table 2): one ruling over the evidence pool ----------------
class DirectDecision(BaseModel):
    reason: str = Field(max_length=300, description="one or two sentences of reasoning")
    decision: Literal["REAL", "FAKE"]


class QuotedDirectDecision(quoted(DirectDecision, "QuotedDirectDecision",  # type: ignore[misc]
                                  "for each passage the ruling rests on, the words it rests on, copied "
                                  "exactly")):
    # no_debate with quotes=show|check (veracity's switch)

    @property
    def label(self) -> str:  # the ruling (traces, the retry's messages)
        return self.decision


DIRECT_JUDGE_SYSTEM = (
    "You are an extremely cautious and logically rigorous final judge of the truthfulness of a news "
    "article. Review the analyses and verification results and rule whether the news is REAL or FAKE. "
    "Reply in JSON."
)
DIRECT_JUDGE_QUOTE = (" Then, for each passage your ruling rests on, give its id (shown in square brackets "
                      "under "
                      "Passages) and the words it rests on, copied exactly from it.")


def direct_judge_system(quoting: bool = False) -> str:
    """``quoting`` (quotes=show|check): the ruling also quotes the passages it rests on."""
    return DIRECT_JUDGE_SYSTEM + (DIRECT_JUDGE_QUOTE if quoting else "")


def direct_judge_turn(pool: str, passages: list[Evidence] | None = None) -> list[Message]:
    return _user(f"Material:\n{pool}" + (f"\n\n{_passages_block(passages).rstrip()}" if passages is not None
                                         else ""))


DIRECT_JUDGE = Role(
    "zofia.judge", turns=(QUOTE_RETRY,), output=DirectDecision, render=direct_judge_turn,
                    instructions=direct_judge_system,
    max_tokens=AGENT_MAX_TOKENS, confidence="decision",
    summary="no_debate ablation only: one REAL / FAKE ruling over the evidence pool (same role name as the "
            "judge)",
    fallback=Fallback(None, "INSUFFICIENT", agent="judge"),
    extra={"paper": "Table 2: w/o Debate"},
)

# Every role name once: DIRECT_JUDGE is the judge (same name, same --param judge.* settings) in the
# no_debate ablation, described by JUDGE's "no_debate" entry.
ROLES = (ENTITIES, LINGUIST, EXPERT_TRIAGE, EXPERT, CLAIM_EXTRACTOR, CLAIM_VERIFIER, PRO, CON, JUDGE)
