"""`veracity check` with the scripted LLM: extraction (decontextualised claims, check-worthiness, declared
fallbacks counted), scores, the terminal / JSON / HTML outputs, resume per text and per claim, bad inputs."""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.unit.scripted_llm import ScriptedLLM
from veracity.check import STAGE
from veracity.check.engine import ClaimVerifier
from veracity.check.extract import sentences_of
from veracity.check.inputs import Doc, decode_text
from veracity.check.render import report_html
from veracity.check.run import check_batch, check_text, parts_dir
from veracity.check.score import factscore, sentence_verdict, text_scores
from veracity.errors import DataError, EndpointError, LLMOutputError
from veracity.pipeline.api import Verifier

TEXT = ("The Eiffel Tower is in Paris. Albert Einstein developed the theory of relativity. "
        "The Nile is a river in Africa, and it empties into the Red Sea. I think Paris is lovely.")
# what the extractor returns per sentence (the pronoun "it" resolved to "The Nile")
CLAIMS = {
    "The Eiffel Tower is in Paris.": ["The Eiffel Tower is in Paris."],
    "Albert Einstein developed the theory of relativity.": ["Albert Einstein developed the theory of "
                                                            "relativity."],
    "The Nile is a river in Africa, and it empties into the Red Sea.": [
        "The Nile is a river in Africa.", "The Nile empties into the Red Sea."],
    "I think Paris is lovely.": ["Paris is lovely."],
}
FALSE = {"The Nile empties into the Red Sea."}


def sentence_of(messages) -> str:
    return messages[-1]["content"].split("Sentence to split:\n", 1)[1]


def claim_of(messages) -> str:
    return messages[-1]["content"].split("Claim: ", 1)[1]


def script(extractor=None, judge=None) -> dict:
    return {
        "check.extractor": extractor or (lambda m: {"claims": CLAIMS[sentence_of(m)]}),
        "check.worthiness": lambda m: {"kind": "opinion" if "lovely" in claim_of(m)
                                       else "checkable_statement"},
        "direct.judge": judge or (lambda m: {"explanation": "known",
                                             "label": "REFUTED" if claim_of(m) in FALSE else "SUPPORTED"}),
    }


def verifier(llm, tmp_path, **kw) -> ClaimVerifier:
    return ClaimVerifier(Verifier(method="direct", llm=llm, state_dir=tmp_path, **kw))


def test_sentences_are_deterministic_spans():
    sents = sentences_of(TEXT)
    assert [s.text for s in sents] == list(CLAIMS)
    assert all(TEXT[s.start:s.end] == s.text for s in sents)


def test_a_text_is_split_classified_verified_and_scored(tmp_path):
    llm = ScriptedLLM(script())
    rec = asyncio.run(check_text(TEXT, verifier(llm, tmp_path), tid="t1", gamma=10))
    verdicts = [s["verdict"] for s in rec["sentences"]]
    assert verdicts == ["SUPPORTED", "SUPPORTED", "REFUTED", "unchecked"]  # worst claim verdict per sentence
    nile = rec["sentences"][2]["claims"]
    assert [c["text"] for c in nile] == CLAIMS[list(CLAIMS)[2]]
    assert [c["id"] for c in nile] == ["t1#s3c1", "t1#s3c2"]
    assert (rec["sentences"][3]["claims"][0]["category"] == "opinion"
            and "label" not in rec["sentences"][3]["claims"][0])
    s = rec["summary"]
    assert s["counts"] == {"SUPPORTED": 3, "REFUTED": 1, "NOT_ENOUGH_INFO": 0, "failed": 0}
    assert s["factual_precision"] == 0.75
    assert s["factscore"] == pytest.approx(0.75 * math.exp(1 - 10 / 4))
    assert s["categories"] == {"factual": 4, "opinion": 1, "not_a_claim": 0}
    assert s["fallbacks"] == {"check.extractor": 0, "check.worthiness": 0}
    assert llm.count("direct.judge") == 4  # the opinion is not verified
    # the extractor sees the whole text before the sentence (pronouns resolvable, shared prefix)
    first = llm.of("check.extractor")[0].messages[-1]["content"]
    assert first.startswith("Text:\n" + TEXT)


def test_the_claim_verdict_is_the_one_verify_gives(tmp_path):
    """Every claim goes through verify_one with the Verifier's settings: the same record as
    Verifier.verify."""
    rec = asyncio.run(check_text(TEXT, verifier(ScriptedLLM(script()), tmp_path), tid="t1"))
    claim = rec["sentences"][2]["claims"][1]
    alone = Verifier(method="direct", llm=ScriptedLLM(script()), state_dir=tmp_path).verify(claim["text"])
    assert (claim["label"], claim["explanation"]) == (alone.label.value, alone.explanation)


def test_a_reply_that_never_validates_falls_back_as_declared_and_is_counted(tmp_path):
    def extractor(m):
        if "Einstein" in sentence_of(m):
            return LLMOutputError("check.extractor: cut at max_tokens", role="check.extractor")
        return {"claims": CLAIMS[sentence_of(m)]}

    llm = ScriptedLLM(script(extractor=extractor))
    rec = asyncio.run(check_text(TEXT, verifier(llm, tmp_path), tid="t"))
    einstein = rec["sentences"][1]["claims"]
    # the sentence itself
    assert [c["text"] for c in einstein] == ["Albert Einstein developed the theory of relativity."]
    assert rec["summary"]["fallbacks"]["check.extractor"] == 1
    assert any(e["kind"] == "check.extractor_failed" for e in rec["extraction_trace"]["events"])


def test_a_claim_that_fails_leaves_the_others_standing(tmp_path):
    def judge(m):
        if "Einstein" in claim_of(m):
            raise RuntimeError("boom")
        return {"explanation": "ok", "label": "SUPPORTED"}

    rec = asyncio.run(check_text(TEXT, verifier(ScriptedLLM(script(judge=judge)), tmp_path), tid="t"))
    assert rec["sentences"][1]["verdict"] == "failed"
    assert "boom" in rec["sentences"][1]["claims"][0]["error"]
    assert rec["sentences"][0]["verdict"] == "SUPPORTED"
    assert rec["summary"]["counts"]["failed"] == 1 and rec["summary"]["counts"]["SUPPORTED"] == 3


def test_a_text_without_factual_claims_says_so(tmp_path):
    llm = ScriptedLLM({"check.extractor": lambda m: {"claims": ["Paris is lovely."]},
                       "check.worthiness": lambda m: {"kind": "opinion"}})
    rec = asyncio.run(check_text("I think Paris is lovely.", verifier(llm, tmp_path)))
    assert rec["summary"]["no_factual_claim"] is True
    assert rec["summary"]["factual_precision"] is None
    from veracity.check.render import summary_line
    assert summary_line(rec).startswith("No factual claim")


def test_scores():
    assert sentence_verdict([]) == "unchecked"
    assert sentence_verdict([None, None]) == "failed"
    assert sentence_verdict(["SUPPORTED", "NOT_ENOUGH_INFO", None]) == "NOT_ENOUGH_INFO"
    assert sentence_verdict(["NOT_ENOUGH_INFO", "REFUTED"]) == "REFUTED"
    assert factscore(0, 0) is None
    assert factscore(10, 10) == 1.0  # no penalty at gamma claims or more
    assert factscore(2, 4, gamma=0) == 0.5
    # no precision over fewer than MIN_DECIDED decided claims; the NEI share beside it always
    few = text_scores(["SUPPORTED", "NOT_ENOUGH_INFO"])
    assert few["factual_precision"] is None and "only 1 decided" in few["precision_withheld"]
    assert few["nei_share"] == 0.5 and few["decided"] == 1
    enough = text_scores(["SUPPORTED", "SUPPORTED", "REFUTED", "NOT_ENOUGH_INFO"])
    assert enough["factual_precision"] == pytest.approx(2 / 3) and enough["nei_share"] == 0.25


def test_the_stage_params_are_validated():
    assert STAGE.make_params({"extractor.max_tokens": 99}).roles == {"extractor": {"max_tokens": 99}}
    from veracity.errors import ConfigError
    with pytest.raises(ConfigError):
        STAGE.make_params({"gamma": -1})


def test_the_report_is_self_contained_and_inserts_text_as_text(tmp_path):
    evil = "The tag </script><img src=x onerror=alert(1)> is __DATA__ here."
    llm = ScriptedLLM({"check.extractor": lambda m: {"claims": [evil]},
                       "check.worthiness": lambda m: {"kind": "checkable_statement"},
                       "direct.judge": lambda m: {"explanation": "x", "label": "REFUTED"}})
    rec = asyncio.run(check_text(evil, verifier(llm, tmp_path)))
    page = report_html(rec)
    assert "</script><img" not in page and "<img" not in page
    assert "http://" not in page and "https://" not in page  # nothing fetched from the network
    data = page.split('<script type="application/json" id="data">', 1)[1].split("</script>", 1)[0]
    assert json.loads(data)["text"] == evil
    assert "innerHTML" not in page


def test_bad_texts_are_one_line_errors():
    for data, what in ((b"", "empty"), (b"  \n", "empty"), (b"\x00\x01ELF", "binary"), (b"\xff\xfe\xfa",
                                                                                        "UTF-8")):
        with pytest.raises(DataError, match=what):
            decode_text(data, "f.txt")
    with pytest.raises(DataError, match="max-chars"):
        decode_text(b"a" * 11, "f.txt", max_chars=10)


def docs() -> list[Doc]:
    return [Doc("a", TEXT), Doc("b", "Albert Einstein developed the theory of relativity.")]


def test_a_batch_resumes_per_text_and_per_claim(tmp_path):
    out = tmp_path / "checks.jsonl"
    calls = {"n": 0}

    def judge(m):  # the endpoint dies on the 3rd verification
        calls["n"] += 1
        if calls["n"] == 3:
            raise EndpointError("endpoint down")
        return {"explanation": "ok", "label": "REFUTED" if claim_of(m) in FALSE else "SUPPORTED"}

    llm1 = ScriptedLLM(script(judge=judge))
    with pytest.raises(EndpointError):
        asyncio.run(check_batch(docs(), out, verifier(llm1, tmp_path, concurrency=1)))
    ext = (parts_dir(out) / "extractions.jsonl").read_text().splitlines()
    assert [json.loads(x)["id"] for x in ext] == ["a"]  # stored before its claims were verified
    verified = [json.loads(x)["id"] for x in (parts_dir(out) / "claims.jsonl").read_text().splitlines()]
    assert len(verified) == 2
    assert not out.exists() or out.read_text() == ""

    llm2 = ScriptedLLM(script())
    seen = []
    stats = asyncio.run(check_batch(docs(), out, verifier(llm2, tmp_path, concurrency=1),
                                    on_progress=lambda *a: seen.append(a)))
    assert seen == [(0, 2), (1, 2), (2, 2)]
    assert stats.done == 2 and stats.extracted == 1  # text a's extraction was reused
    assert llm2.count("check.extractor") == 1  # only text b's one sentence
    again = [c.prompt for c in llm2.of("direct.judge")]
    assert not any(v in p for v in verified for p in again)
    assert llm2.count("direct.judge") == 4 - 2 + 1  # a's two remaining claims, b's one
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert [r["id"] for r in rows] == ["a", "b"]
    assert rows[0]["summary"]["counts"]["REFUTED"] == 1
    claims = [json.loads(x)["id"] for x in (parts_dir(out) / "claims.jsonl").read_text().splitlines()]
    assert len(claims) == len(set(claims)) == 5  # none verified twice, none lost

    llm3 = ScriptedLLM({})
    seen = []
    stats = asyncio.run(check_batch(docs(), out, verifier(llm3, tmp_path),
                                    on_progress=lambda *a: seen.append(a)))
    assert seen == [(0, 0)]
    assert stats.skipped == 2 and llm3.calls == []


def test_a_changed_text_under_a_stored_id_is_refused(tmp_path):
    out = tmp_path / "c.jsonl"
    llm = ScriptedLLM(script(judge=lambda m: EndpointError("down")))
    with pytest.raises(EndpointError):
        asyncio.run(check_batch(docs(), out, verifier(llm, tmp_path)))
    with pytest.raises(DataError, match="differs"):
        asyncio.run(check_batch([Doc("a", "Something else entirely.")], out, verifier(ScriptedLLM({}),
                                                                                      tmp_path)))


# -- the command ------------------------------------------------------------------------------------
def run_cli(args, tmp_path, input=None):
    from veracity.cli import _register, cli

    _register()
    env = {"VERACITY_HOME": str(tmp_path / "home"), "VERACITY_ENDPOINT": "http://127.0.0.1:9/v1"}
    return CliRunner().invoke(cli, args, env=env, input=input, catch_exceptions=False)


@pytest.mark.parametrize("args,content,message", [
    (["check", "{f}"], b"", "empty text"),
    (["check", "{f}"], b"\x7fELF\x00\x00", "binary"),
    (["check", "{f}", "--max-chars", "5"], b"Paris is in France.", "over --max-chars 5"),
    (["check", "-"], None, "empty text"),
    (["check", "{f}", "--evidence", "gold"], b"Paris is in France.", "--evidence gold"),
    (["check", "{f}", "--check-param", "gamma=-3"], b"Paris is in France.", "gamma"),
])
def test_bad_inputs_are_one_line_before_any_server(tmp_path, args, content, message):
    f = tmp_path / "t.txt"
    if content is not None:
        f.write_bytes(content)
    res = run_cli([a.replace("{f}", str(f)) for a in args], tmp_path, input="")
    assert res.exit_code != 0
    assert message in res.output and "hint:" in res.output and "Traceback" not in res.output


def test_the_command_prints_sentences_claims_and_writes_the_report(tmp_path, monkeypatch):
    llm = ScriptedLLM(script(), repeat_last=True)
    import veracity.pipeline.api as api

    real = api.Verifier._build  # what Verifier(**kw) and Verifier.from_config both go through

    def with_llm(self, *a, **kw):
        kw["llm"] = llm
        real(self, *a, **kw)

    monkeypatch.setattr(api.Verifier, "_build", with_llm)
    f = tmp_path / "t.txt"
    f.write_text(TEXT)
    report = tmp_path / "r.html"
    res = run_cli(["check", str(f), "--method", "direct", "--report", str(report), "--factscore"], tmp_path)
    assert res.exit_code == 0, res.output
    assert "[REFUTED] The Nile is a river in Africa" in res.output
    assert "The Nile empties into the Red Sea.  REFUTED" in res.output
    assert "factual precision 0.75" in res.output and "FActScore" in res.output
    assert report.read_text().startswith("<!doctype html>")
    res = run_cli(["check", "-", "--method", "direct", "--json"], tmp_path, input=TEXT)
    rec = json.loads(res.stdout)
    # not on a terminal: a line per sentence and per claim on stderr, the JSON alone on stdout
    assert "sentence 3/4: 2 claims, 2 factual" in res.stderr and "claim 4/4" in res.stderr
    assert rec["sentences"][2]["verdict"] == "REFUTED" and "trace" in rec["sentences"][2]["claims"][1]
    out = tmp_path / "o.jsonl"
    docs_file = tmp_path / "d.jsonl"
    docs_file.write_text(json.dumps({"id": "x", "text": TEXT}) + "\nnot json\n")
    res = run_cli(["check", "-i", str(docs_file), "-o", str(out), "--method", "direct"], tmp_path)
    assert res.exit_code == 0, res.output
    assert "1 texts written" in res.output and "d.jsonl:2: not JSON" in res.output


def test_methods_show_lists_the_check_roles(tmp_path):
    res = run_cli(["methods", "show", "check", "--json"], tmp_path)
    names = [r["name"] for r in json.loads(res.output)["roles"]]
    assert names == ["check.extractor", "check.worthiness"]


def test_the_example_text_has_five_sentences():
    text = (Path(__file__).resolve().parents[2] / "examples" / "text.txt").read_text()
    assert len(sentences_of(text)) == 5


def test_an_empty_claim_list_does_not_validate_so_no_sentence_is_dropped_silently(tmp_path):
    """The schema asks for at least one claim: an empty reply is invalid and falls back to the sentence."""
    from veracity.check.roles import AtomicClaims
    from veracity.serving.structured import response_format_for

    assert response_format_for(AtomicClaims)["json_schema"]["schema"]["properties"]["claims"]["minItems"] == 1
    llm = ScriptedLLM(script(extractor=lambda m: {"claims": []}))
    rec = asyncio.run(check_text("Marie Curie won two Nobel Prizes.", verifier(llm, tmp_path), tid="t"))
    assert [c["text"] for c in rec["sentences"][0]["claims"]] == ["Marie Curie won two Nobel Prizes."]
    assert rec["summary"]["fallbacks"]["check.extractor"] == 1


def test_score_boundaries():
    """The rules of the long-form score at their edges (each one a line of check/score.py's docstring)."""
    from veracity.check.score import MIN_DECIDED, worst

    # a text's verdict: REFUTED before NOT_ENOUGH_INFO before SUPPORTED; other values ignored, None when none
    assert worst(["SUPPORTED", "NOT_ENOUGH_INFO", "REFUTED"]) == "REFUTED"
    assert worst(["SUPPORTED", "unchecked", "NOT_ENOUGH_INFO"]) == "NOT_ENOUGH_INFO"
    assert worst(["failed", None, "SUPPORTED"]) == "SUPPORTED"
    assert worst(["unchecked", "failed", None]) is None and worst([]) is None
    assert sentence_verdict(["SUPPORTED", "SUPPORTED"]) == "SUPPORTED"
    assert sentence_verdict([None, "SUPPORTED", None]) == "SUPPORTED"  # a failed claim hides no verdict
    assert sentence_verdict(iter(["REFUTED", "NOT_ENOUGH_INFO"])) == "REFUTED"  # any iterable, read once
    # the length penalty: below gamma verified claims, f * exp(1 - gamma / n); none at gamma or with gamma=0
    assert factscore(3, 4) == pytest.approx(0.75 * math.exp(1 - 10 / 4))
    assert factscore(9, 9) == pytest.approx(math.exp(1 - 10 / 9))
    assert factscore(5, 5, gamma=5) == 1.0 and factscore(1, 4, gamma=0) == 0.25
    assert factscore(0, 4) == 0.0 and factscore(1, -1) is None
    # one verified claim is scored, with the penalty
    assert factscore(1, 1) == pytest.approx(math.exp(1 - 10))
    assert factscore(12, 12) == 1.0 and factscore(6, 12) == 0.5  # above gamma: no penalty
    # a value outside the severity order ranks as NOT_ENOUGH_INFO does: above SUPPORTED, below REFUTED
    assert sentence_verdict(["SUPPORTED", "OTHER"]) == "OTHER" and sentence_verdict(["OTHER",
                                                                                     "REFUTED"]) == "REFUTED"
    # precision from MIN_DECIDED decided claims on; NOT_ENOUGH_INFO is not decided, failed claims are counted
    assert MIN_DECIDED == 3
    three = text_scores(["SUPPORTED", "REFUTED", "REFUTED", "NOT_ENOUGH_INFO", None])
    assert three["factual_precision"] == pytest.approx(1 / 3) and "precision_withheld" not in three
    assert three["counts"] == {"SUPPORTED": 1, "REFUTED": 2, "NOT_ENOUGH_INFO": 1, "failed": 1}
    assert three["decided"] == 3 and three["nei_share"] == 0.25 and "factscore" not in three
    two = text_scores(["REFUTED", "SUPPORTED"])
    assert two["factual_precision"] is None and two["precision_withheld"] == \
        "only 2 decided claims (at least 3 needed)"
    none = text_scores(["NOT_ENOUGH_INFO", None])
    assert none["factual_precision"] is None and "precision_withheld" not in none and none["nei_share"] == 1.0
    assert text_scores([None])["nei_share"] is None and text_scores([])["decided"] == 0
    scored = text_scores(["SUPPORTED", "SUPPORTED", "NOT_ENOUGH_INFO", None], gamma=0)
    # NEI is not supported
    assert scored["factscore"] == pytest.approx(2 / 3) and scored["factscore_gamma"] == 0
    penalised = text_scores(["SUPPORTED", "SUPPORTED", "NOT_ENOUGH_INFO"], gamma=4)
    assert (penalised["factscore"] == pytest.approx(2 / 3 * math.exp(1 - 4 / 3))
            and penalised["factscore_gamma"] == 4)


def test_verification_overlaps_extraction_and_the_record_and_events_are_the_sequential_ones(tmp_path):
    """Issue 44 point 5: a sentence's claims are verified while later sentences are still being extracted
    (a judge call starts before the last extractor call ends), queued in the text's order; the record, and
    the order of what on_event hears, are those of extracting the whole text first and verifying after."""
    from veracity.check.extract import extract
    from veracity.check.run import assemble, claims_to_verify

    last = list(CLAIMS)[-1]

    def slow_last(call):  # the last sentence's extraction is slow: the others' claims are verified meanwhile
        return 0.3 if call.role == "check.extractor" and sentence_of(call.messages) == last else 0.0

    llm = ScriptedLLM(script(), delay=slow_last)
    events: list[dict] = []
    rec = asyncio.run(check_text(TEXT, verifier(llm, tmp_path, concurrency=2), tid="t",
                                 on_event=events.append))
    extractor_end = max(c.end_seq for c in llm.of("check.extractor"))
    judges = llm.of("direct.judge")
    assert min(c.start_seq for c in judges) < extractor_end  # overlap
    # claims queued in the text's order: the first judged claim is the first sentence's
    assert claim_of(min(judges, key=lambda c: c.start_seq).messages) == "The Eiffel Tower is in Paris."
    kinds = [e["kind"] for e in events]
    at = kinds.index("check.extracted")
    assert "claim.verdict" not in kinds[:at] and kinds.count("claim.verdict") == 4
    assert kinds[-1] == "check.done"
    assert kinds.index("check.sentence") < at

    # the sequential path, composed of the same pieces, on a fresh scripted LLM: the same record
    async def sequential():
        ref_llm = ScriptedLLM(script())
        cv = verifier(ref_llm, tmp_path / "seq", concurrency=2)
        async with cv.client() as client:
            ex = await extract(TEXT, client, tid="t")
            results = await cv.verify_claims(claims_to_verify(ex), client)
            return assemble(ex, results, cv.method, None, cv.header(client))

    ref = asyncio.run(sequential())

    def essentials(r):
        return ([[(c["id"], c["text"], c["category"], c.get("label"), c.get("explanation"),
                   [e["passage_id"] for e in c.get("evidence", [])]) for c in s["claims"]]
                 for s in r["sentences"]],
                [s["verdict"] for s in r["sentences"]],
                {k: v for k, v in r["summary"].items() if k != "uncertain"}, r["dropped"])

    assert essentials(rec) == essentials(ref)


def test_an_endpoint_failure_while_verifying_stops_extraction_too(tmp_path):
    def judge(m):
        raise EndpointError("the server went away")

    def slow(call):
        return 2.0 if call.role == "check.extractor" and sentence_of(call.messages).startswith("I think") \
            else 0.0

    llm = ScriptedLLM(script(judge=judge), delay=slow)
    import time
    t0 = time.monotonic()
    with pytest.raises(EndpointError):
        asyncio.run(check_text(TEXT, verifier(llm, tmp_path), tid="t"))
    assert time.monotonic() - t0 < 1.5  # the slow extraction was not waited for



def test_extractions_requests_carry_the_extraction_priority_and_verifications_the_default(tmp_path):
    """Issue 44 point 5: the client lets extraction's requests (which verification waits on) go before the
    verification requests waiting beside them (veracity.serving.gate)."""
    from veracity.serving.gate import EXTRACTION, current_priority

    priorities: dict[str, set[int]] = {}

    def note(call):
        priorities.setdefault(call.role, set()).add(current_priority())
        return 0.0

    llm = ScriptedLLM(script(), delay=note)
    from veracity.check.roles import CheckParams  # the model's check-worthiness asked too

    rec = asyncio.run(check_text(TEXT, verifier(llm, tmp_path, concurrency=4), tid="t",
                                 params=CheckParams(worthiness=True)))
    assert priorities == {"check.extractor": {EXTRACTION}, "check.worthiness": {EXTRACTION},
                          "direct.judge": {1}}
    assert [s["verdict"] for s in rec["sentences"]] == ["SUPPORTED", "SUPPORTED", "REFUTED", "unchecked"]
