"""Verdicts that quote their evidence (issue 31): the deterministic quote check, and rag's judge with
quotes=off|show|check on the scripted LLM (the Amazon misreading replayed)."""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.unit.scripted_llm import FakeSearcher, ScriptedLLM
from veracity.pipeline.grounding import MISMATCH_EVENT, UNGROUNDED_EVENT, quoting
from veracity.pipeline.labels import BINARY
from veracity.pipeline.methods import METHODS
from veracity.pipeline.methods.rag import RagJudgement, RagQuotedJudgement
from veracity.pipeline.quotes import Quote, check_quotes, locate, normalise, problems
from veracity.pipeline.engine import verify_one
from veracity.pipeline.types import Claim, Evidence, Label


# ----------------------------------------------------------------- the check: normalisation and offsets
def span(quote: str, passage: str) -> str | None:
    at = locate(quote, passage)
    return None if at is None else passage[at[0]:at[1]]


@pytest.mark.parametrize("quote, passage, expected", [
    # odd whitespace: runs, newlines, tabs, non-breaking spaces are one space; offsets cover the original
    ("flows into the Atlantic", "It  flows\n into\tthe\u00a0Atlantic Ocean.",
     "flows\n into\tthe\u00a0Atlantic"),
    # case
    ("THE ATLANTIC ocean", "into the Atlantic Ocean.", "the Atlantic Ocean"),
    # curly quotes either way round
    ('called "the river sea"', "It is called \u201cthe river sea\u201d today.",
     "called \u201cthe river sea\u201d"),
    ("\u2018Old Man River\u2019", "nicknamed 'Old Man River' by", "'Old Man River'"),
    # dashes: en / em dash, minus sign and hyphen are one dash
    ("1914-1918", "served 1914\u20131918 in France", "1914\u20131918"),
    ("1914 \u2013 1918", "The war lasted 1914-1918.", "1914-1918"),  # a space before a dash does not count
    ("1914 -1918", "The war lasted 1914-1918.", "1914-1918"),
    ("Paris \u2014 the capital", "Paris - the capital of France", "Paris - the capital"),
    # diacritics: composed and decomposed forms are the same letter (NFKC)
    ("Zu\u0308rich", "He moved to Z\u00fcrich in 1900.", "Z\u00fcrich"),
    ("Z\u00fcrich", "He moved to Zu\u0308rich in 1900.", "Zu\u0308rich"),
    # compatibility forms: a ligature, full-width digits, the ellipsis character
    ("the first", "the \ufb01rst of them", "the \ufb01rst"),
    ("born in 1867", "born in \uff11\uff18\uff16\uff17.", "born in \uff11\uff18\uff16\uff17"),
    # quote marks and an ellipsis around the quote are not part of it
    ('"...the largest river by discharge..."', "It is the largest river by discharge of water.",
     "the largest river by discharge"),
    # soft hyphens and zero-width spaces in the passage are ignored
    ("Amazonas", "Ama\u00adzo\u200bnas", "Ama\u00adzo\u200bnas"),
    # found in the seed-5 FEVEROUS-S gold run (issue 31): wiki link markup in the passage reads as its words,
    # a quote that keeps the markup too; single for double quote marks, the full stop outside them
    ("He also went on to appear in the MTV reality show Ex on the Beach in 2015.",
     "He also went on to appear in the [[MTV_(UK_and_Ireland)|MTV]] reality show [[Ex_on_the_Beach|Ex on the "
     "Beach]] in 2015, and", "He also went on to appear in the [[MTV_(UK_and_Ireland)|MTV]] reality show "
     "[[Ex_on_the_Beach|Ex on the Beach]] in 2015"),
    ("born in [[Brussels|Brussels]] as", "She was born in [[Brussels|Brussels]] as the",
     "born in [[Brussels|Brussels]] as"),
    ("expelled from the CPGB in 1965", "expelled from the [[CPGB]] in 1965.",
     "expelled from the [[CPGB]] in 1965"),
    ("it was initially called 'Romanian Paradise'.", 'it was initially called "Romanian Paradise."',
     'it was initially called "Romanian Paradise'),
    # spaces next to a dash do not count
    ("the Lake Tahoe Basin- Reno-Sparks metropolitan area", "the [[Lake_Tahoe|Lake Tahoe]] Basin-[[Reno\u2013"
     "Sparks_metropolitan_area|Reno\u2013Sparks metropolitan area]].", "the [[Lake_Tahoe|Lake Tahoe]] Basin-"
     "[[Reno\u2013Sparks_metropolitan_area|Reno\u2013Sparks metropolitan area"),
])
def test_a_quote_is_found_after_normalising_and_its_offsets_are_in_the_original(quote, passage, expected):
    assert span(quote, passage) == expected


@pytest.mark.parametrize("quote, passage", [
    ("flows into the Pacific Ocean", "The Amazon River flows into the Atlantic Ocean."),
    ("Zurich", "He moved to Z\u00fcrich in 1900."),  # a dropped diacritic is another word
    ("the largest river ... of water", "It is the largest river by discharge of water."),  # no gaps
    ("", "anything"),
    ('" ... "', "anything"),
    # the same run's other mismatches stay mismatches: a corrected verb, a title that is not in the text,
    # the words of a link's target (not displayed)
    ("It began on 23 November 2013", "It begun on 23 November 2013 in [[Klingenthal|Klingenthal]]"),
    ("Padeniya", "It is located within North Western Province."),
    ("City of license", "[[City_of_license|Licensed]] to South Lake Tahoe"),
])
def test_a_quote_that_is_not_there_is_not_found(quote, passage):
    assert locate(quote, passage) is None


def test_the_same_reply_always_gets_the_same_decision():
    passage = ("The  Amazon River\u00a0\u2014 in South\nAmerica \u2014 flows into the \u201cAtlantic\u201d "
               "Ocean.")
    quotes = [("Amazon River#0", "amazon river - in south america"), ("Amazon River#0", "the Pacific Ocean")]
    ev = [Evidence("Amazon River#0", "Amazon River", passage)]
    first = check_quotes(quotes, ev)
    assert all(check_quotes(quotes, ev) == first for _ in range(20))
    assert [q.found for q in first] == [True, False]
    assert passage[first[0].start:first[0].end] == "Amazon River\u00a0\u2014 in South\nAmerica"


def test_normalise_maps_every_character_back_to_the_original():
    text = "A\u00a0\u00a0b\u2014\u201cc\u201d \ufb01"
    norm, spans = normalise(text)
    assert norm == 'a b-"c" fi' and len(spans) == len(norm)
    assert [text[s:e] for s, e in spans] == ["A", "\u00a0\u00a0", "b", "\u2014", "\u201c", "c", "\u201d", " ",
                                             "\ufb01", "\ufb01"]


def test_a_quote_must_be_in_the_passage_it_cites_and_a_decisive_verdict_must_quote():
    shown = [Evidence("A#0", "A", "Alpha is first."), Evidence("B#0", "B", "Beta is second.")]
    found = check_quotes([("B#0", "Alpha is first"), ("A#0", "Alpha is first"), ("C#0", "x")], shown)
    assert [q.found for q in found] == [False, True, False]
    assert problems(found, decisive=True) == ['"Alpha is first" is not in passage [B#0]',
                                              '"x" is not in passage [C#0]']
    assert problems([], decisive=True) == ["the verdict quotes no passage"]
    assert problems([], decisive=False) == []
    assert Quote("A#0", "Alpha", 0, 5).to_dict() == {"passage_id": "A#0", "text": "Alpha", "start": 0,
                                                     "end": 5,
                                                      "found": True}


def test_the_quote_schema_enumerates_the_shown_ids_and_bounds_each_quote():
    model = quoting(RagQuotedJudgement, ["A#0", "B#0"])
    schema = model.model_json_schema()
    item = schema["$defs"]["PassageQuote"]["properties"]
    assert item["passage_id"]["enum"] == ["A#0", "B#0"] and item["quote"]["maxLength"] == 200
    assert schema["properties"]["quotes"]["maxItems"] == 5
    assert list(schema["properties"]) == ["explanation", "label", "quotes"]  # reasoning first
    assert quoting(RagQuotedJudgement, [], True).model_json_schema()["properties"]["quotes"]["maxItems"] == 0


def test_each_character_of_a_cluster_is_normalised_on_its_own():
    """A combining mark after a character that normalising drops or changes (a zero-width character, the
    space of a spacing diaeresis, the space after a dash, an editorial bracket) is kept, with its cluster's
    offsets: only the character a rule is about goes, so a quote that leaves such a mark out is not the
    passage's words."""
    assert normalise("Mu\u00a8ller") == ("mu \u0308ller", [(0, 1), (1, 2), (2, 3), (2, 3), (3, 4), (4, 5),
                                                           (5, 6), (6, 7)])
    assert normalise("a-\u00a8b") == ("a-\u0308b", [(0, 1), (1, 2), (2, 3), (3, 4)])
    assert normalise("x[\u0301y") == ("x\u0301y", [(0, 1), (1, 3), (3, 4)])
    assert normalise("a\u200b\u0301b") == ("a\u0301b", [(0, 1), (1, 3), (3, 4)])
    passage = "Herr Mu\u00a8ller kam."
    assert locate("Mu\u00a8ller", passage) == (5, 12) and locate("Mu ller", passage) is None


def test_the_per_call_quote_models_keep_their_descriptions_and_modules():
    """The model reads the schema's descriptions (what a quote and its passage id are); the per-call models
    keep the module of the classes they narrow (where pickle and error messages look a class up); with no
    passage shown a quote is still a PassageQuote, just none allowed."""
    from veracity.pipeline.grounding import PassageQuote

    model = quoting(RagQuotedJudgement, ["A#0"])
    schema = model.model_json_schema()
    assert schema["$defs"]["PassageQuote"]["properties"]["passage_id"]["description"] == \
        "the id of the passage quoted, e.g. 'Title#0'"
    described = schema["properties"]["quotes"]["description"]
    assert described and described == RagQuotedJudgement.model_fields["quotes"].description
    (item,) = model.model_fields["quotes"].annotation.__args__
    assert item.__module__ == PassageQuote.__module__ and item.__name__ == "PassageQuote"
    assert model.__module__ == RagQuotedJudgement.__module__ and model.__name__ == RagQuotedJudgement.__name__
    none = quoting(RagQuotedJudgement, [])
    assert none.model_fields["quotes"].annotation.__args__ == (PassageQuote,)
    assert none.model_json_schema()["properties"]["quotes"]["items"] == {"$ref": "#/$defs/PassageQuote"}


# ----------------------------------------------------------------- rag with quotes
# the false attribution: the passage says nothing about the river's mouth
AMAZON = {"Amazon River": ["The Amazon River in South America is the largest river by discharge volume of "
                           "water "
                           "in the world, and the disputed longest river system in the world."]}
CLAIM = Claim("amazon", "The Amazon River flows into the Pacific Ocean")
MISREAD = {"explanation": "The passage states that the Amazon River flows into the Pacific Ocean.",
           "label": "SUPPORTED",
           "quotes": [{"passage_id": "Amazon River#0",
                       "quote": "The Amazon River flows into the Pacific Ocean"}]}
HONEST = {"explanation": "The passage does not say where the river ends.", "label": "NOT_ENOUGH_INFO",
          "quotes": [{"passage_id": "Amazon River#0",
                      "quote": "the largest river by discharge volume of water"}]}


def run_rag(replies, space=None, **params):
    llm = ScriptedLLM({"rag.judge": list(replies)})
    spec = METHODS["rag"]
    verdict = asyncio.run(verify_one(CLAIM, spec, llm, FakeSearcher(AMAZON),
                                     spec.make_params({"select": "false", **params}),
                                     label_space=space))
    return verdict, llm


def events(verdict, kind):
    return [e for e in verdict.trace.events if e["kind"] == kind]


def test_the_amazon_misreading_is_not_supported_when_the_retry_misreads_again():
    verdict, llm = run_rag([MISREAD, MISREAD], quotes="check")
    assert verdict.label is Label.NOT_ENOUGH_INFO and verdict.grounding == "ungrounded"
    assert [c.role for c in llm.calls] == ["rag.judge", "rag.judge"]  # one retry, no more
    retry = llm.calls[1].messages
    assert retry[:2] == llm.calls[0].messages and retry[2]["role"] == "assistant"
    assert ('"The Amazon River flows into the Pacific Ocean" is not in passage [Amazon River#0]'
            in retry[3]["content"])
    assert [e["attempt"] for e in events(verdict, MISMATCH_EVENT)] == [1, 2]
    (ung,) = events(verdict, UNGROUNDED_EVENT)
    assert ung["label_given"] == "SUPPORTED" and ung["label"] == "NOT_ENOUGH_INFO" and ung["mode"] == "check"
    record = json.loads(json.dumps(verdict.to_dict(CLAIM)))
    assert record["grounding"] == "ungrounded" and record["quotes"][0]["found"] is False
    assert record["quotes"][0]["start"] is None
    assert record["explanation"].startswith("Ungrounded: ")
    assert [e["passage_id"] for e in record["evidence"]] == ["Amazon River#0"]  # what it cited stays visible


def test_a_retry_that_quotes_the_passage_stands_with_its_offsets():
    verdict, llm = run_rag([MISREAD, HONEST], quotes="check")
    assert verdict.label is Label.NOT_ENOUGH_INFO and verdict.grounding == "grounded" and len(llm.calls) == 2
    (q,) = verdict.quotes
    text = AMAZON["Amazon River"][0]
    assert q.found and text[q.start:q.end] == "the largest river by discharge volume of water"
    assert events(verdict, UNGROUNDED_EVENT) == []


def test_a_grounded_first_reply_costs_no_retry():
    verdict, llm = run_rag([HONEST], quotes="check")
    assert len(llm.calls) == 1 and verdict.grounding == "grounded" and events(verdict, MISMATCH_EVENT) == []
    assert "words your label rests on, copied exactly" in llm.calls[0].messages[0]["content"]


def test_show_marks_the_misreading_but_keeps_its_label():
    verdict, llm = run_rag([MISREAD], quotes="show")
    assert verdict.label is Label.SUPPORTED and verdict.grounding == "ungrounded" and len(llm.calls) == 1
    assert verdict.quotes[0].found is False


def test_a_decisive_verdict_without_quotes_is_ungrounded():
    bare = {**MISREAD, "quotes": []}
    verdict, llm = run_rag([bare, bare], quotes="check")
    assert verdict.label is Label.NOT_ENOUGH_INFO and len(llm.calls) == 2
    assert "the verdict quotes no passage" in llm.calls[1].messages[-1]["content"]


def test_binary_gives_the_not_supported_label():
    verdict, llm = run_rag([MISREAD, MISREAD], space=BINARY, quotes="check")
    assert verdict.label is Label.REFUTED and verdict.grounding == "ungrounded"
    assert "answer REFUTED" in llm.calls[1].messages[-1]["content"]


def test_quotes_off_is_rag_as_before():
    reply = RagJudgement(explanation="e", label="SUPPORTED", cited_passages=["Amazon River#0"])
    verdict, llm = run_rag([reply])
    assert llm.calls[0].output_model.__name__ == "RagJudgement"
    assert "quotes" not in llm.calls[0].output_model.model_fields
    assert "copied exactly" not in llm.calls[0].messages[0]["content"]
    record = verdict.to_dict(CLAIM)
    assert "quotes" not in record and "grounding" not in record and verdict.label is Label.SUPPORTED
    assert METHODS["rag"].make_params({}).quotes == "off"


def test_every_method_that_reads_passages_has_the_switch_off_by_default_and_direct_says_why_not():
    from veracity.errors import ConfigError

    for name, spec in METHODS.items():
        if name == "direct":
            with pytest.raises(ConfigError,
                               match="direct reads no passages .closed book., so its verdict has nothing"):
                spec.make_params({"quotes": "check"})
            continue
        assert spec.make_params({}).quotes == "off", name
        assert spec.make_params({"quotes": "check"}).quotes == "check", name


# ----------------------------------------------------------------- where people look
def test_the_cli_panel_prints_each_quote_under_its_passage():
    from rich.console import Console

    from veracity.cli.verify import render_verdict, verdict_line

    verdict, _ = run_rag([MISREAD, HONEST], quotes="check")
    record = json.loads(json.dumps(verdict.to_dict(CLAIM)))
    console = Console(record=True, width=200, color_system=None)
    console.print(render_verdict(record))
    lines = console.export_text().splitlines()
    at = next(i for i, line in enumerate(lines) if "[Amazon River#0] Amazon River" in line)
    below = "\n".join(lines[at:])
    assert "“the largest river by discharge volume of water”  ✓ in the passage (characters 37-83)" in below
    assert "ungrounded" not in "\n".join(lines)

    misread, _ = run_rag([MISREAD, MISREAD], quotes="check")
    record = json.loads(json.dumps(misread.to_dict(CLAIM)))
    console = Console(record=True, width=200, color_system=None)
    console.print(render_verdict(record))
    text = console.export_text()
    assert "ungrounded: a quote is not in its passage" in text
    assert "“The Amazon River flows into the Pacific Ocean”  ✗ not in this passage" in text
    assert "ungrounded" in verdict_line(record, None).plain


# ----------------------------------------------------------------- MERMAID's switch (off in the paper
# configs)
def run_mermaid(executor, final=(), **params):
    from veracity.pipeline.engine import open_run_state

    llm = ScriptedLLM({"mermaid.executor": list(executor), "mermaid.final": list(final)})
    spec, searcher = METHODS["mermaid"], FakeSearcher(AMAZON)
    made = spec.make_params({"decomposer": False, "memory": False, "t_max": 2, **params})
    state = open_run_state(spec, made, searcher, None)
    try:
        verdict = asyncio.run(verify_one(CLAIM, spec, llm, searcher, made, state))
    finally:
        state.close()
    return verdict, llm


SEARCH = {"thought": "look it up", "action": "search", "argument": "Amazon River", "label": None,
          "quotes": []}
FINISH_MISREAD = {"thought": "The passage says it flows into the Pacific.", "action": "finish",
                  "argument": "",
                  "label": "SUPPORTED", "quotes": MISREAD["quotes"]}


def test_mermaid_quotes_check_retries_a_misread_finish_as_the_final_verdict():
    verdict, llm = run_mermaid([SEARCH, FINISH_MISREAD], [MISREAD], quotes="check")
    assert [c.role for c in llm.calls] == ["mermaid.executor", "mermaid.executor", "mermaid.final"]
    retry = llm.calls[2].messages
    assert retry[:-2] == llm.calls[1].messages and retry[-2]["role"] == "assistant"
    assert "is not in passage [Amazon River#0]" in retry[-1]["content"]
    assert verdict.label is Label.NOT_ENOUGH_INFO and verdict.grounding == "ungrounded"
    assert "words the label rests on, copied exactly" in llm.calls[0].messages[0]["content"]


def test_mermaid_quotes_check_keeps_a_grounded_forced_verdict():
    verdict, llm = run_mermaid([SEARCH, SEARCH], [HONEST], quotes="check")
    assert [c.role for c in llm.calls][-1] == "mermaid.final" and len(llm.calls) == 3
    assert (verdict.label is Label.NOT_ENOUGH_INFO and verdict.grounding == "grounded"
            and verdict.quotes[0].found)


def test_mermaid_quotes_off_is_the_paper_executor():
    step = {k: v for k, v in FINISH_MISREAD.items() if k != "quotes"} | {"cited_passages": ["Amazon River#0"]}
    search = {k: v for k, v in SEARCH.items() if k != "quotes"} | {"cited_passages": []}
    verdict, llm = run_mermaid([search, step])
    assert verdict.label is Label.SUPPORTED and verdict.quotes is None and len(llm.calls) == 2
    assert "quotes" not in llm.calls[1].output_model.model_fields
    assert "quotes" not in verdict.to_dict(CLAIM)


# ----------------------------------------------------------------- issue 44: brackets, chunk edges, key terms
def test_editorial_brackets_and_chunk_edges_are_tolerated():
    passage = ('She won the Nobel Prize in Chemistry "[for] the discovery of the elements radium and '
               'polonium".')
    assert span('"for the discovery of the elements radium',
                passage) == '"[for] the discovery of the elements radium'
    chunk = "In 1898 Marie Curie discovered the elements radium and"  # the chunk ends mid-sentence
    (q,) = check_quotes([("a", "discovered the elements radium and polonium in 1898")], [Evidence("a", "t",
                                                                                                  chunk)])
    assert q.found and q.at_edge and chunk[q.start:q.end] == "discovered the elements radium and"
    assert q.to_dict()["at_edge"] is True and "at_edge" not in Quote("a", "x", 0, 1).to_dict()
    (q,) = check_quotes([("a", "She was the first woman")], [Evidence("a", "t", "Marie Curie. She")])
    assert not q.found  # three characters at the edge prove nothing


def test_a_verbatim_quote_that_never_mentions_the_claims_key_terms_is_flagged():
    from veracity.pipeline.quotes import key_terms, quote_terms

    assert key_terms("Rome is on the Tiber.") == ["Rome", "Tiber"]
    rome = [Quote("Rome#1", "Rome is the capital city of Italy", 0, 33)]
    terms = quote_terms("Rome is on the Tiber.", rome)
    assert terms["missing"] == ["Tiber"] and terms["flag"] == "the quotes never mention Tiber"
    elsewhere = [Quote("Tiber#0", "the river flows through the city", 0, 30)]
    assert quote_terms("Rome is on the Tiber.", elsewhere)["flag"] == "the quotes never mention Rome"
    assert quote_terms("Rome is on the Tiber.", [Quote("R#0", "Rome lies on the Tiber", 0,
                                                       5)])["flag"] is None
    verdict, _ = run_rag([HONEST], quotes="check")
    assert verdict.to_dict(CLAIM)["quote_terms"]["subject"] == "Amazon River"


def test_an_explanation_may_not_attribute_words_the_passage_lacks():
    from veracity.pipeline.quotes import unsupported_attributions

    curie = [Evidence("Marie Curie#0", "Marie Curie",
                      "Marie Curie was a Polish physicist and chemist who conducted "
                      "pioneering research on radioactivity.")]
    (lack,) = unsupported_attributions("The passage states that Marie Curie was born in Warsaw, so the claim "
                                       "is "
                                       "refuted.", curie)
    assert "born, warsaw" in lack
    assert unsupported_attributions("Passage [Marie Curie#0] says she was a Polish physicist.", curie) == []
    assert unsupported_attributions("The passage says nothing about her birthplace.", curie) == []
    assert unsupported_attributions('It reads "born in Paris in 1900".',
                                    curie) == ['"born in Paris in 1900" is not in the passages']
    # in quotes=check the attribution is a mismatch like a missing quote: retried, then not supported
    lying = {**HONEST, "label": "SUPPORTED",
             "explanation": "The passage states that the river ends in the Pacific."}
    verdict, llm = run_rag([lying, lying], quotes="check")
    assert len(llm.calls) == 2 and "the passages, which lack" in llm.calls[1].messages[-1]["content"]
    assert verdict.label is Label.NOT_ENOUGH_INFO and verdict.grounding == "ungrounded"


def test_a_binary_refuted_verdict_must_quote_too():
    bare = {**HONEST, "label": "REFUTED", "quotes": []}
    verdict, llm = run_rag([bare, bare], space=BINARY, quotes="check")
    assert len(llm.calls) == 2 and "the verdict quotes no passage" in llm.calls[1].messages[-1]["content"]
    assert verdict.grounding == "ungrounded"


def test_check_shows_the_quotes_in_json_terminal_and_html():
    from rich.console import Console

    from veracity.check.extract import ExtractedClaim, Extraction, Sentence
    from veracity.check.render import render_text, report_html
    from veracity.check.run import assemble

    verdict, _ = run_rag([HONEST], quotes="check")
    claim = Claim("t#s1c1", CLAIM.text)
    ex = Extraction("t", CLAIM.text + ".", [Sentence(1, 0, len(CLAIM.text) + 1, CLAIM.text + ".",
                                                      [ExtractedClaim("t#s1c1", CLAIM.text, "factual")])], {},
                    {})
    rec = json.loads(json.dumps(assemble(ex, {claim.id: verdict.to_dict(claim)}, "rag")))
    item = rec["sentences"][0]["claims"][0]
    assert (item["quotes"][0]["text"] == "the largest river by discharge volume of water"
            and item["grounding"] == "grounded")
    assert item["quote_terms"]["flag"] == "the quotes never mention Amazon River"
    con = Console(width=250, record=True)
    con.print(render_text(rec))
    out = con.export_text()
    assert "\u201cthe largest river by discharge volume of water\u201d  found" in out
    assert "warning: the quotes never mention Amazon River" in out
    page = report_html(rec)
    assert "c.quotes" in page and "the largest river by discharge volume of water" in page


# ----------------------------------------------------------------- the chunk-edge rule, boundary by boundary
# each quote is 50 characters, so the part a chunk holds must be at least 25 (half the quote; EDGE_MIN_CHARS
# is 20) and end (or start) at a word boundary
@pytest.mark.parametrize("quote, passage, expected", [
    # the quote's first 25 characters end the passage: found, the offsets cover them in the original text
    ("Marie Curie discovered it radium and polonium 1898", "In her notes: Marie  Curie discovered it",
     "Marie  Curie discovered it"),
    # 26 characters (the search tries every length, not every other one)
    ("Marie Curie discovered two element radium polonium", "In her notes: Marie Curie discovered two",
     "Marie Curie discovered two"),
    # the quote's last 25 characters start the passage (the word before them has more than one letter, so
    # only the space right before the part marks the boundary)
    ("Marie Curie found in its radium and polonium, 1898", "Radium and  polonium, 1898 were named then.",
     "Radium and  polonium, 1898"),
    # one character short of half the quote, at either edge: not found
    ("Marie Curie discovered a radium and polonium, 1898", "In her notes: Marie Curie discovered a", None),
    ("Marie Curie discovered it radium and polonium 1898", "radium and polonium 1898 were named then.", None),
    # the edge cuts a word of the quote: the passage's words are not the quote's
    ("the elements radium and polonium in 1898", "Curie discovered the elements radium and polo", None),
    ("the elements radium and polonium in 1898", "ements radium and polonium in 1898 by Curie.", None),
])
def test_a_quote_cut_by_the_chunk_edge_needs_half_of_it_at_a_word_boundary(quote, passage, expected):
    from veracity.pipeline.quotes import locate_at_edge

    assert locate(quote, passage) is None  # not a whole quote of the passage
    at = locate_at_edge(quote, passage)
    assert (None if at is None else passage[at[0]:at[1]]) == expected
    (q,) = check_quotes([("p", quote)], [Evidence("p", "t", passage)])
    assert q.found == (expected is not None) and q.at_edge == (expected is not None)
    assert (q.start, q.end) == (at if at else (None, None))


def test_a_quote_found_twice_is_located_at_its_first_occurrence():
    passage = "The river floods. Later the river floods again."
    assert locate("the river floods", passage) == (0, 16)
    assert locate('"the river floods."', passage) == (0, 16)  # the core, without the marks and full stop


def test_a_quote_of_only_marks_and_dots_is_never_found_even_where_the_passage_has_them():
    for quote in ("...", '"."', '" ... "', "."):
        assert locate(quote, 'Wait... he said "." and left.') is None, quote


def test_each_combining_mark_stays_with_its_own_letter_in_the_offsets():
    norm, spans = normalise("Zu\u0308rich")  # u + combining diaeresis: one letter, two characters
    assert norm == "z\u00fcrich" and spans == [(0, 1), (1, 3), (3, 4), (4, 5), (5, 6), (6, 7)]
    norm, spans = normalise("e\u0301\u0302x")  # two marks on one letter
    assert norm[-1] == "x" and spans[-1] == (3, 4) and all(s == (0, 3) for s in spans[:-1])


def test_the_grounding_texts_and_schemas_word_for_word():
    from pydantic import BaseModel

    from veracity.pipeline.grounding import (Grounded, not_supported, quoted, retry_prompt,
                                             ungrounded_explanation)
    from veracity.pipeline.labels import THREE_WAY

    assert retry_prompt(["a", "b"], THREE_WAY) == (
        "Your quotes must be copied word for word from the passages they cite, and a verdict that the "
        "passages "
        "settle must quote them. These do not hold:\n- a\n- b\nAnswer again: quote the exact words of the "
        "passages "
        "your label rests on, or, if the passages do not say it, answer NOT_ENOUGH_INFO.")
    assert retry_prompt(["a"], BINARY).endswith("answer REFUTED.") and retry_prompt(["a"], BINARY,
                                                                                    "False").endswith(
        "answer False.")
    assert not_supported(THREE_WAY) is Label.NOT_ENOUGH_INFO and not_supported(BINARY) is Label.REFUTED

    class Reply(BaseModel):
        explanation: str
        cited_passages: list[str]
        label: str

    model = quoted(Reply, "QuotedReply", "quotes from the passages shown")
    assert list(model.model_fields) == ["explanation", "label", "quotes"] and model.__name__ == "QuotedReply"
    assert model.model_json_schema()["properties"]["quotes"]["maxItems"] == 5
    assert quoting(model, ["A#0"], enabled=False) is model
    schema = quoting(model, ["A#0", "B#0", "A#0"], at_most=2).model_json_schema()
    assert schema["$defs"]["PassageQuote"]["properties"]["passage_id"]["enum"] == ["A#0", "B#0"]  # once each
    assert schema["properties"]["quotes"]["maxItems"] == 2

    reply = model(explanation="It says so.", label="SUPPORTED", quotes=[])
    g = Grounded(reply, [], "ungrounded", problems=["x is not in passage [A#0]",
                                                    "the verdict quotes no passage"])
    assert ungrounded_explanation(g) == ("Ungrounded: x is not in passage [A#0]; the verdict quotes no "
                                         "passage. "
                                         "The judge had answered SUPPORTED: It says so.")
    assert ungrounded_explanation(g, "T").endswith("answered SUPPORTED: T")


def test_whitespace_at_the_ends_and_inside_runs_maps_back_exactly():
    norm, spans = normalise("  Zurich  ")  # spaces before and after: dropped
    assert norm == "zurich" and spans[0] == (2, 3) and spans[-1] == (7, 8)
    # a run later in the text: one space
    assert normalise("ab  c") == ("ab c", [(0, 1), (1, 2), (2, 4), (4, 5)])
    assert locate("  flows into the  ", "It flows into the sea.") == (3, 17)


def test_attributions_read_negations_in_any_case_and_quoted_spans_from_three_words():
    from veracity.pipeline.quotes import unsupported_attributions

    ev = [Evidence("Amazon River#0", "Amazon River", AMAZON["Amazon River"][0])]
    assert unsupported_attributions("The passage says Nothing about the mouth of the river.", ev) == []
    both = unsupported_attributions("The passage says nothing about Peru. The passage states that the Amazon "
                                    "flows into the Pacific.", ev)
    assert len(both) == 1 and "Pacific" in both[0]  # a negated attribution does not end the reading
    assert unsupported_attributions('It is "the Pacific Ocean" here.', ev) == [
        '"the Pacific Ocean" is not in the passages']  # three words: checked
    assert unsupported_attributions('It is "Pacific Ocean" here.', ev) == []  # two words: too short to tell
    assert unsupported_attributions('It is "the largest river" here.', ev) == []  # three words found


# ----------------------------------------------------------------- the check and its one retry, as functions
class _Trace:
    def __init__(self):
        self.events = []

    def event(self, kind, **fields):
        self.events.append({"kind": kind, **fields})


class _Role:
    """A judging role that answers from a list (an exception in it is raised), recording each call."""

    def __init__(self, name, replies):
        self.name, self.replies, self.calls = name, list(replies), []

    def messages(self, **inputs):
        return [{"role": "system", "content": "judge"}, {"role": "user", "content": inputs["claim"]}]

    async def __call__(self, ctx, *, output, messages, trace_info=None):
        self.calls.append({"output": output, "messages": messages, "trace_info": trace_info})
        reply = self.replies.pop(0)
        if isinstance(reply, BaseException):
            raise reply
        return output.model_validate(reply)


def test_the_check_and_its_retry_trace_each_attempt_and_send_what_they_say():
    """check_reply / ask_quoting called directly: the trace events word for word (role, attempt, label,
    problems), the retry's messages and trace_info, ``retried``, the fallback the retry offers, the label
    the verdict takes; a retry that fails to validate keeps the first reply's mismatch."""
    from types import SimpleNamespace

    from veracity.errors import LLMOutputError
    from veracity.pipeline.grounding import QUOTE_RETRY, ask_quoting, check_reply
    from veracity.pipeline.labels import THREE_WAY

    shown = [Evidence("Amazon River#0", "Amazon River", AMAZON["Amazon River"][0])]
    output = quoting(RagQuotedJudgement, ["Amazon River#0"])
    bare = {**MISREAD, "explanation": "Because."}  # the quote is the one problem (no attribution read)
    first = output.model_validate(bare)
    miss = ['"The Amazon River flows into the Pacific Ocean" is not in passage [Amazon River#0]']
    sent = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]

    def ctx(space=THREE_WAY):
        return SimpleNamespace(label_space=space, trace=_Trace())

    # check: a mismatch, a retry as another role that misreads again
    c, judge, final = ctx(), _Role("m.executor", []), _Role("m.final", [bare])
    g = asyncio.run(check_reply(c, first, judge, "check", shown, sent=sent, retry_role=final, output=output,
                                fallback="NO"))
    assert c.trace.events == [
        {"kind": MISMATCH_EVENT, "role": "m.executor", "attempt": 1, "label": "SUPPORTED", "problems": miss},
        {"kind": MISMATCH_EVENT, "role": "m.final", "attempt": 2, "label": "SUPPORTED", "problems": miss},
        {"kind": UNGROUNDED_EVENT, "role": "m.executor", "mode": "check", "label_given": "SUPPORTED",
         "label": "NOT_ENOUGH_INFO", "problems": miss}]
    (call,) = final.calls
    assert call["output"] is output and call["trace_info"] == {"retry": "quotes"}
    assert call["messages"] == [*sent, {"role": "assistant", "content": first.model_dump_json()},
                                {"role": "user", "content": QUOTE_RETRY(miss, THREE_WAY, "NO")}]
    assert call["messages"][-1]["content"].endswith("answer NO.")
    assert g.retried is True and g.grounding == "ungrounded" and g.problems == miss
    assert g.replaced is Label.NOT_ENOUGH_INFO and g.reply.label == "SUPPORTED"

    # a retry that never validates: the first reply and its mismatch stand, the failure is traced
    c, judge = ctx(), _Role("rag.judge", [LLMOutputError("no JSON")])
    g = asyncio.run(check_reply(c, first, judge, "check", shown, sent=sent, retry_role=judge, output=output))
    assert c.trace.events[1] == {"kind": MISMATCH_EVENT, "role": "rag.judge", "attempt": 2, "label": None,
                                 "problems": ["no JSON"]}
    assert g.reply is first and g.retried is True and g.problems == miss
    assert g.replaced is Label.NOT_ENOUGH_INFO
    assert "answer NOT_ENOUGH_INFO." in judge.calls[0]["messages"][-1]["content"]  # the space's fallback

    # show: no retry, the label stands, retried is False (not merely falsy)
    c, judge = ctx(BINARY), _Role("rag.judge", [])
    g = asyncio.run(check_reply(c, first, judge, "show", shown, sent=sent, retry_role=judge, output=output))
    assert judge.calls == [] and g.retried is False and g.replaced is None and g.grounding == "ungrounded"
    assert c.trace.events == [{"kind": UNGROUNDED_EVENT, "role": "rag.judge", "mode": "show",
                               "label_given": "SUPPORTED", "label": "SUPPORTED", "problems": miss}]

    # ask_quoting sends the messages it is given (not the role's own), and passes label_of and fallback on
    c, judge = ctx(), _Role("rag.judge", [bare, HONEST])
    g = asyncio.run(ask_quoting(c, judge, "check", shown, output=output, messages=sent, fallback="NO",
                                label_of=lambda r: "NOT_ENOUGH_INFO", claim="x"))
    assert judge.calls[0]["messages"] == sent
    assert judge.calls[1]["messages"][-1]["content"].endswith("answer NO.")
    assert g.grounding == "grounded" and g.reply.label == "NOT_ENOUGH_INFO"
    c, judge = ctx(), _Role("rag.judge", [{**bare, "quotes": []}, {**bare, "quotes": []}])
    g = asyncio.run(ask_quoting(c, judge, "show", shown, output=output, claim="the claim",
                                label_of=lambda r: "NOT_ENOUGH_INFO"))
    assert judge.calls[0]["messages"][-1]["content"] == "the claim"  # the role's own messages
    # label_of says the reply does not settle the claim, so it need not quote: grounded
    assert g.problems == [] and g.grounding == "grounded" and c.trace.events == []
    g = asyncio.run(ask_quoting(ctx(), judge, "show", shown, output=output, claim="the claim"))
    assert g.problems == ["the verdict quotes no passage"]  # its own label (SUPPORTED) must quote


def test_a_quoted_model_keeps_its_module_and_its_quotes_description_and_ungrounded_reads_the_thought():
    from pydantic import BaseModel

    from veracity.pipeline.grounding import Grounded, quoted, ungrounded_explanation

    model = quoted(RagJudgement, "Quoted", "quotes from the passages shown")
    assert model.__module__ == RagJudgement.__module__ and model.__name__ == "Quoted"
    quotes = model.model_json_schema()["properties"]["quotes"]
    assert quotes["description"] == "quotes from the passages shown"
    assert "cited_passages" not in model.model_fields

    class Thought(BaseModel):
        thought: str
        label: str

    class Bare(BaseModel):
        label: str

    def g(reply):
        return Grounded(reply, [], "ungrounded", True, ["p1", "p2"], Label.NOT_ENOUGH_INFO)

    assert ungrounded_explanation(g(Thought(thought="it says so", label="SUPPORTED"))) == \
        "Ungrounded: p1; p2. The judge had answered SUPPORTED: it says so"
    assert ungrounded_explanation(g(Bare(label="REFUTED"))) == \
        "Ungrounded: p1; p2. The judge had answered REFUTED: "
    assert ungrounded_explanation(g(Bare(label="REFUTED")), "said").endswith("REFUTED: said")
