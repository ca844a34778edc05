"""The sentence guard (no model): an extracted claim stays in its sentence plus the antecedents it resolves;
a failing claim is re-asked once, then dropped and counted."""

from __future__ import annotations

import asyncio

from tests.unit.scripted_llm import ScriptedLLM
from veracity.check.engine import ClaimVerifier
from veracity.check.guard import check_claim, fragment
from veracity.check.roles import CheckParams
from veracity.check.run import check_text
from veracity.pipeline.api import Verifier

BIO = ("Marie Curie was born in Warsaw in 1867. She married Pierre Curie in 1895. "
       "She won the Nobel Prize in Chemistry in 1911. The Great Wall of China is long. "
       "The wall is a UNESCO World Heritage Site.")
S = [s.strip() + "." for s in BIO.split(".") if s.strip()]


def test_a_resolved_pronoun_or_reference_passes():
    assert check_claim("Marie Curie married Pierre Curie in 1895.", S[1], BIO).ok
    assert check_claim("Marie Curie won the Nobel Prize in Chemistry.", S[2], BIO).ok
    assert check_claim("The Great Wall of China is a UNESCO World Heritage Site.", S[4], BIO).ok
    # "husband": not the text's
    assert check_claim("Marie Curie's husband was Pierre Curie.", S[1], BIO).ok is False


def test_a_rewritten_word_or_a_copied_sentence_fails():
    v = check_claim("Marie Curie met Pierre Curie in 1895.", S[1], BIO)
    assert not v.ok and "met" in v.reason
    assert not check_claim("Marie Curie was born in Warsaw.", S[2], BIO).ok  # another sentence, copied
    v = check_claim("Marie Curie was born in 1867 and won the Nobel Prize.", S[2], BIO)
    assert not v.ok and "other sentences" in v.reason  # facts of sentence 1 carried into sentence 3


def test_a_description_carried_from_another_sentence_fails_a_name_resolving_a_reference_passes():
    # the README's example text: "a river in Africa" (the Nile's sentence) carried into the Danube's claim
    text = ("The Nile is a river in Africa, and it empties into the Red Sea. "
            "The Danube flows into the Baltic Sea.")
    sentence = "The Danube flows into the Baltic Sea."
    v = check_claim("The Danube is a river in Africa, and it flows into the Baltic Sea.", sentence, text)
    assert not v.ok and v.reason == "adds a description from other sentences: a river", v
    assert check_claim("The Danube flows into the Baltic Sea.", sentence, text).ok
    # a name after "a" modifies the sentence's own noun: "a prize" resolved to "a Nobel Prize" stays in
    bio = "Marie Curie won the Nobel Prize in 1911. She won a prize twice."
    assert check_claim("Marie Curie won a Nobel prize twice.", "She won a prize twice.", bio).ok
    assert not check_claim("Marie Curie won an early prize twice.", "She won a prize twice.",
                           "Marie Curie won an early prize in 1903. She won a prize twice.").ok


def test_inflections_and_numbers_compare_equal():
    assert check_claim("Arsenal won the FA Cup in 2002.", "They won six FA Cups: 1998, 2002.",
                       "Arsenal is a club. They won six FA Cups: 1998, 2002.").ok
    assert check_claim("The city has 1000 people.", "The city has 1,000 people.",
                       "The city has 1,000 people.").ok


def test_a_failing_claim_is_reasked_once_then_dropped_and_counted(tmp_path):
    asked: list[str] = []

    def extractor(m):
        sent = m[1]["content"].split("Sentence to split:\n", 1)[1]
        if len(m) > 2:  # the re-ask: one fixed, one still outside the sentence
            asked.append(m[-1]["content"])
            return {"claims": ["Marie Curie married Pierre Curie in 1895.",
                               "Marie Curie was born in Warsaw."]}
        if sent == S[1]:
            return {"claims": ["Marie Curie met Pierre Curie in 1895.", "Marie Curie was born in Warsaw."]}
        return {"claims": [sent.replace("She ", "Marie Curie ").replace("The wall",
                                                                        "The Great Wall of China")]}

    llm = ScriptedLLM({"check.extractor": extractor,
                       "check.worthiness": lambda m: {"kind": "checkable_statement"},
                       "direct.judge": lambda m: {"explanation": "ok", "label": "SUPPORTED"}})
    cv = ClaimVerifier(Verifier(method="direct", llm=llm, state_dir=tmp_path))
    rec = asyncio.run(check_text(BIO, cv, tid="t"))
    assert len(asked) == 1 and "met" in asked[0] and "Warsaw" in asked[0]  # one re-ask naming the failures
    assert [c["text"] for c in rec["sentences"][1]["claims"]] == ["Marie Curie married Pierre Curie in 1895."]
    assert rec["summary"]["dropped"] == 2
    dropped = {d["claim"] for d in rec["dropped"]}
    assert dropped == {"Marie Curie met Pierre Curie in 1895.", "Marie Curie was born in Warsaw."}
    assert llm.count("check.extractor") == len(S) + 1
    from veracity.check.render import summary_line
    assert "2 claims dropped" in summary_line(rec)
    rec["summary"]["dropped"] = 1
    assert "1 claim dropped (" in summary_line(rec)


def test_a_sentence_left_without_claims_is_checked_as_itself(tmp_path):
    llm = ScriptedLLM({"check.extractor": lambda m: {"claims": ["Paris is the capital of France."]},
                       "check.worthiness": lambda m: {"kind": "checkable_statement"},
                       "direct.judge": lambda m: {"explanation": "ok", "label": "SUPPORTED"}})
    cv = ClaimVerifier(Verifier(method="direct", llm=llm, state_dir=tmp_path))
    rec = asyncio.run(check_text("Rome lies on the Tiber.", cv, tid="t"))
    assert [c["text"] for c in rec["sentences"][0]["claims"]] == ["Rome lies on the Tiber."]
    # the same claim twice: one drop
    assert llm.count("check.extractor") == 2 and rec["summary"]["dropped"] == 1


def test_an_opinion_is_recognised_without_the_model_and_never_turns_its_sentence_red(tmp_path):
    from veracity.check.opinions import opinion_rule
    from veracity.check.render import render_text

    text = "I think Kyoto is a far better trip than Tokyo. Kyoto was the capital of Japan."
    llm = ScriptedLLM({"check.extractor": lambda m: {"claims": [
                           "Kyoto is a far better trip than Tokyo."
                           if "think" in m[-1]["content"].split("split:\n")[1]
                           else "Kyoto was the capital of Japan."]},
                       "check.worthiness": lambda m: {"kind": "checkable_statement"},
                       "direct.judge": lambda m: {"explanation": "no", "label": "REFUTED"}})
    cv = ClaimVerifier(Verifier(method="direct", llm=llm, state_dir=tmp_path))
    # with the model's check-worthiness asked too (worthiness=true): it sees only what the rule leaves
    rec = asyncio.run(check_text(text, cv, tid="t", params=CheckParams(worthiness=True)))
    first = rec["sentences"][0]
    assert first["claims"][0]["category"] == "opinion" and first["verdict"] == "unchecked"
    assert llm.count("check.worthiness") == 1 and llm.count("direct.judge") == 1  # only the fact
    # by default the rule alone sorts: no check-worthiness call, the same categories
    again = asyncio.run(check_text(text, ClaimVerifier(Verifier(method="direct", llm=llm,
                                                                state_dir=tmp_path / "b")), tid="t"))
    assert llm.count("check.worthiness") == 1 and llm.count("direct.judge") == 2
    assert [[c["category"] for c in s["claims"]] for s in again["sentences"]] == [["opinion"], ["factual"]]
    from rich.console import Console
    con = Console(width=200, record=True)
    con.print(render_text(rec))
    assert "opinion, not checked" in con.export_text()
    assert opinion_rule("The film won the Academy Award for Best Picture.") is None  # a name, not a judgement
    assert opinion_rule("The Great Wall of China is long.") is None
    assert opinion_rule("Electric cars will replace petrol cars.")[0] == "opinion"
    assert opinion_rule("What is the capital of France?")[0] == "not_a_claim"


def test_fragments_fail_and_a_claim_starting_with_a_pronoun_is_named():
    from veracity.check.guard import fragment, replaces, unresolved_reference, without_near_duplicates
    gp = "The 1932 Australian Grand Prix was a race held on a dirt track circuit in Victoria, Australia."
    assert not check_claim("held on a dirt track circuit", gp, gp).ok  # seed 11's fragments
    assert "not a full sentence" in check_claim("in Victoria, Australia", gp, gp).reason
    assert not fragment("iPhone 12 was released in 2020.")  # a name with a capital inside is a sentence
    assert unresolved_reference("It was contested over 40 laps.") == "it"
    assert unresolved_reference("This win was led by Diego Maradona.") == "this"
    assert unresolved_reference("Italy won the cup.") == ""
    assert replaces("The 1932 Australian Grand Prix was contested over 40 laps.",
                    "It was contested over 40 laps.")
    assert not replaces("It was contested over 40 laps.", "It was contested over 40 laps.")
    kept, dup = without_near_duplicates(["The race was won by driver Bill Thompson.",
                                         "The race was won by Bill Thompson.",
                                         "Bill Thompson drove a Bugatti Type 37A."])
    assert kept == ["The race was won by driver Bill Thompson.", "Bill Thompson drove a Bugatti Type 37A."]
    assert dup == ["The race was won by Bill Thompson."]


def test_a_pronoun_is_reasked_and_replaced_in_place_or_kept(tmp_path):
    text = "Argentina is a country. They won the tournament in 1986. It rained all day."
    asked: list[str] = []

    def extractor(m):
        sent = m[1]["content"].split("Sentence to split:\n", 1)[1]
        if len(m) > 2:
            asked.append(m[-1]["content"])
            return {"claims": ["Argentina won the tournament in 1986."] if "They" in asked[-1]
                    else ["It rained all day."]}
        return {"claims": [sent,
                           "Argentina won the tournament in 1986."] if sent.startswith("They") else [sent]}

    llm = ScriptedLLM({"check.extractor": extractor,
                       "check.worthiness": lambda m: {"kind": "checkable_statement"},
                       "direct.judge": lambda m: {"explanation": "ok", "label": "SUPPORTED"}})
    cv = ClaimVerifier(Verifier(method="direct", llm=llm, state_dir=tmp_path))
    rec = asyncio.run(check_text(text, cv, tid="t"))
    assert len(asked) == 2 and "starts with 'they'" in asked[0]
    # "They won ..." replaced by its resolved form, which the first reply also gave: one claim, not two
    assert [c["text"] for c in rec["sentences"][1]["claims"]] == ["Argentina won the tournament in 1986."]
    # nothing better: kept
    assert [c["text"] for c in rec["sentences"][2]["claims"]] == ["It rained all day."]


# -- issue 44, point 1: sentences that state nothing, references named, the extractor's context -------------
HOWTO = ("To find a good decorator, you can follow these steps:\n\n1. Compare the quotes offered by each "
         "decorator. As a language model, I do not have access to prices. Wildflowers should never be "
         "plucked. The Louvre is in Paris.")


def test_instructions_advice_and_the_writer_on_itself_are_sentences_without_a_claim():
    from veracity.check.opinions import sentence_rule
    # seed 11's claim-less sentences (development data), then what must still go to the extractor
    assert sentence_rule("To find the best interior decorator and best price, you can follow these "
                         "steps:\n\n1.") == ("not_a_claim", "introduces a list")
    assert sentence_rule("Compare the quotes and services offered by each interior decorator.")[0] == \
        "not_a_claim"
    assert sentence_rule("Research online to find interior decorators in your area. Look for their "
                         "portfolios, customer reviews, and ratings.") == ("not_a_claim",
                                                                          "an instruction ('research')")
    assert sentence_rule("As a language model, I do not have access to visual information like colors, so "
                         "I cannot tell you the color of the paper.") == ("not_a_claim",
                                                                         "the writer speaks of itself")
    assert sentence_rule("However, it is important to note that wildflowers should never be plucked or "
                         "uprooted from the wild.") == ("opinion", "advises ('should')")
    assert sentence_rule("Sure, here are some other Chinese scholars who chaired NLP conferences: 1.")[0] == \
        "not_a_claim"
    for fact in ("Research shows that sleep matters.", "Water boils at high heat.",
                 "Visit the Louvre, which holds the Mona Lisa.",  # a name: the extractor may find the fact
                 "As of my knowledge cutoff of 2021, four women have served on the Supreme Court.",
                 "Therefore, you can find land on Earth, Jupiter, and Mars.", "Use of antibiotics is rising.",
                 "Plants must have sunlight to grow."):
        assert sentence_rule(fact) is None, fact


def test_a_sentence_without_a_claim_gets_no_extractor_call_and_is_shown_unchecked(tmp_path):
    from veracity.check.extract import Sentence, claims_in_sentence
    from veracity.pipeline.methods.base import MethodContext
    from veracity.pipeline.types import Trace

    seen: list[str] = []

    def extractor(m):
        sent = m[1]["content"].split("Sentence to split:\n", 1)[1]
        seen.append(sent)
        return {"claims": [sent]}

    llm = ScriptedLLM({"check.extractor": extractor,
                       "check.worthiness": lambda m: {"kind": "checkable_statement"},
                       "direct.judge": lambda m: {"explanation": "ok", "label": "SUPPORTED"}})
    cv = ClaimVerifier(Verifier(method="direct", llm=llm, state_dir=tmp_path))
    rec = asyncio.run(check_text(HOWTO, cv, tid="t"))
    assert seen == ["The Louvre is in Paris."]  # one extractor call: the only sentence that states a fact
    # the list's number "1." is a sentence of its own for the splitter: no words, no claim
    cats = [[c["category"] for c in s["claims"]] for s in rec["sentences"]]
    assert cats == [["not_a_claim"]] * 4 + [["opinion"], ["factual"]]
    assert [s["verdict"] for s in rec["sentences"]] == ["unchecked"] * 5 + ["SUPPORTED"]
    assert llm.count("direct.judge") == 1 and llm.count("check.worthiness") == 0  # the rule alone, by default
    ruled = [e for e in rec["extraction_trace"]["events"] if e["kind"] == "check.sentence_rule"]
    assert [e["sentence"] for e in ruled] == [1, 2, 3, 4, 5]
    # the path benchmarks/check_eval.py measures: no claim at all for such a sentence
    trace = Trace()
    ctx = MethodContext(llm=llm, tools=None, trace=trace, params=None, seed=None, claim_id="x")
    assert asyncio.run(claims_in_sentence(ctx, HOWTO, Sentence(2, 0, 0, "Compare the quotes offered by each "
                                                                      "decorator."), trace)) == ([], [])


def test_a_gerund_phrase_is_a_fragment_a_quoted_term_is_not():
    from veracity.check.guard import fragment
    assert fragment("Extracting data from the legacy system") == \
        "is not a full sentence (no verb after 'Extracting')"
    assert fragment("Integrating it into the modern lakehouse architecture")
    assert not fragment("Smoking causes cancer.") and not fragment("Swimming improved his health.")
    # Factcheck-GPT's annotators write such claims: a quoted lower-case term is the subject, not a fragment
    assert not fragment("'land' can be found on Earth.") and not fragment('"solid ground" is found on Mars.')


def test_a_short_description_of_something_named_before_is_reasked_with_the_name(tmp_path):
    from veracity.check.guard import unresolved_description
    before = "The 1932 Australian Grand Prix was a motorsport race held on a dirt track. "
    assert unresolved_description("The race was won by driver Bill Thompson.", before) == "the race"
    assert unresolved_description("The race's winner was Bill Thompson.", before) == "the race"
    assert unresolved_description("The production quantity can vary.", "Cashmere production is high.") == \
        "the production quantity"
    assert unresolved_description("The race was won by Bill Thompson.", "") == ""  # nothing named before
    assert unresolved_description("The domestication of cattle started 8,000 years ago.",
                                  "Cattle were domesticated.") == ""  # "of ...": it describes itself
    assert unresolved_description("The total distance was 160 miles.", before) == ""  # not named before

    text = before + "The race was won by driver Bill Thompson."
    asked: list[str] = []

    def extractor(m):
        if len(m) > 2:
            asked.append(m[-1]["content"])
            return {"claims": ["The 1932 Australian Grand Prix was won by driver Bill Thompson."]}
        sent = m[1]["content"].split("Sentence to split:\n", 1)[1]
        return {"claims": [sent]}

    llm = ScriptedLLM({"check.extractor": extractor,
                       "check.worthiness": lambda m: {"kind": "checkable_statement"},
                       "direct.judge": lambda m: {"explanation": "ok", "label": "SUPPORTED"}})
    rec = asyncio.run(check_text(text, ClaimVerifier(Verifier(method="direct", llm=llm, state_dir=tmp_path)),
                                 tid="t"))
    assert len(asked) == 1 and "'the race'" in asked[0] and "full name" in asked[0]
    assert [c["text"] for c in rec["sentences"][1]["claims"]] == [
        "The 1932 Australian Grand Prix was won by driver Bill Thompson."]


def test_the_extractor_sees_the_sentence_before_and_the_first_sentence_and_the_rules():
    from veracity.check.roles import EXTRACTOR, EXTRACTOR_SYSTEM
    text = "The Harbour Cup is a race in Lisbon. It began in 1952. It is rowed over 8 km."
    msgs = EXTRACTOR.messages(text=text, sentence="It is rowed over 8 km.")
    user = msgs[-1]["content"]
    assert user.startswith("Text:\n" + text)  # the shared prefix first
    assert ("The text's first sentence:\nThe Harbour Cup is a race in Lisbon.\n\nThe sentence before it:\n"
            "It began in 1952.\n\nSentence to split:\nIt is rowed over 8 km.") in user
    second = EXTRACTOR.messages(text=text, sentence="It began in 1952.")[-1]["content"]
    assert "first sentence" not in second and "The sentence before it:\nThe Harbour Cup" in second
    assert "before it" not in EXTRACTOR.messages(text=text, sentence="The Harbour Cup is a race in "
                                                 "Lisbon.")[-1]["content"]
    # the decontextualisation rules of Factcheck-Bench / FActScore, and the claim-less kinds of sentence
    for rule in ("short description of something named earlier", "Split lists", "Never return a fragment",
                 "instruction or advice to the reader", "the writer speaking of itself"):
        assert rule in EXTRACTOR_SYSTEM, rule
    assert msgs[0] == {"role": "system", "content": EXTRACTOR_SYSTEM}


def test_common_words_carried_from_another_sentence_fail_names_and_numbers_pass():
    # seed 11's copied claim (the hand-read sample's one copy): "world", "cup", "once" are sentence 1's
    text = ("Argentina has won the FIFA world cup once. They won the tournament in 1986, when they defeated "
            "West Germany in the final.")
    sentence = "They won the tournament in 1986, when they defeated West Germany in the final."
    v = check_claim("Argentina won the FIFA world cup once.", sentence, text)
    assert not v.ok and v.reason == "carries common words from other sentences: world, cup, once", v
    assert check_claim("Argentina won the tournament in 1986.", sentence, text).ok  # a name resolves "They"
    # a whole other sentence copied under one word of this one (SmolLM2 on seed 11, control-flow run)
    cashmere = ("According to the International Trade Centre, the global cashmere production is around "
                "20,000 metric tons per year. However, the production quantity can vary greatly depending on "
                "weather.")
    assert not check_claim("The International Trade Centre, the global cashmere production is around 20,000 "
                           "metric tons per year.", "However, the production quantity can vary greatly "
                           "depending on weather.", cashmere).ok
    # two common words are what the annotators themselves add ("to form stars")
    stars = ("Gas clouds collapse to form stars. These elements and processes are controlled by the laws of "
             "physics.")
    assert check_claim("The elements and processes to form stars are controlled by the laws of physics.",
                       "These elements and processes are controlled by the laws of physics.", stars).ok


# seed 765's rows (benchmarks/BENCHMARKS.md, issue 44): the copies the hand-read found, and true claims of the
# same responses that must still pass
SM_S = ["The SM U-30 was a Type U 27 German submarine used during World War I.",
        "It was commissioned on December 22, 1914, and had a displacement of 662 tons when surfaced and 834 "
        "tons when submerged.",
        "The U-boat was armed with four 50cm torpedo tubes and a 88 mm deck gun.",
        "It sank a total of 42 ships during its service, but was eventually sunk by the British submarine "
        "E22 on August 4, 1915, with the loss of all hands."]
SM = " ".join(SM_S)
BP = " ".join([
    "As of my knowledge cutoff in September 2021, Blackpink has released a total of four albums.",
    "1. “Square One\" (2016) - This is Blackpink's debut single album, which includes the tracks \"Whistle\" "
    "and \"Boombayah.”",
    "2. “Square Two\" (2016) - This is their second single album, featuring the songs \"Playing with Fire\" "
    "and \"Stay.\"",
    "3. “Blackpink in Your Area\" (2018) - This is a compilation album that includes all of Blackpink's "
    "previous releases.",
    "4. “The Album\" (2020) - This is their first full-length studio album, which contains eight tracks."])


def test_a_number_or_a_date_from_another_sentence_fails():
    v = check_claim("The SM U-30 was commissioned on December 22, 1914.", SM_S[0], SM)
    assert not v.ok and v.reason == "carries a number or date from other sentences: December", v
    v = check_claim("The album 'Blackpink in Your Area' was released in 2018.",
                    "As of my knowledge cutoff in September 2021, Blackpink has released a total of four "
                    "albums.", BP)
    # its name, written only in a later sentence, is found first (its year, 2018, is another sentence's too)
    assert not v.ok and v.reason == "carries a name from later sentences: Area", v
    # a list's number is not the sentence's: "four" is not "4. “The Album" ..."
    v = check_claim("Blackpink has released four albums.", "4. “The Album\" (2020) - This is their first "
                    "full-length studio album, which contains eight tracks.", BP)
    assert not v.ok and "four" in v.reason, v
    # a time is not a list's number
    meeting = "The meeting starts at 10:30."
    assert check_claim(meeting, meeting, meeting).ok
    # the sentence's own numbers, written as words or digits, and a name that resolves a reference pass
    assert check_claim("The SM U-30 was commissioned on December 22, 1914.", SM_S[1], SM).ok
    assert check_claim("The SM U-30 was armed with four 50cm torpedo tubes.", SM_S[2], SM).ok
    assert check_claim("The SM U-30 sank a total of 42 ships during its service.", SM_S[3], SM).ok
    assert check_claim("Blackpink has released a total of 4 albums.", BP.split(". 1.")[0] + ".", BP).ok
    # a number that describes the sentence's "this ..." or "then", from the text before (seed 11, the gold)
    mara = ("Argentina has won the FIFA world cup once. They won the tournament in 1986, when they defeated "
            "West Germany in the final. This win was led by the famous soccer player Diego Maradona.")
    assert check_claim("Diego Maradona led Argentina's win in 1986.",
                       "This win was led by the famous soccer player Diego Maradona.", mara).ok
    china = ("China made its debut in the Olympic Games in 1952 but started gaining prominence in the 1980s. "
             "Since then, China's Olympic success has been remarkable.")
    assert check_claim("China's Olympic success has been remarkable since 1980s.",
                       "Since then, China's Olympic success has been remarkable.", china).ok


def test_a_name_from_another_sentence_fails_unless_the_sentence_refers_to_something():
    text = ("There have been only four female presidents of the United States in the country's history, so "
            "it is difficult to determine an average height for this group. The four female presidents were: "
            "\r\n1.Abigail Adams (1797-1801) \r\n2.Marilyn Carlson Nelson (2009-2013)")
    sentence = ("The four female presidents were: \r\n1.Abigail Adams (1797-1801) \r\n2.Marilyn Carlson "
                "Nelson (2009-2013)")
    v = check_claim("There have been only four female presidents of the United States in the country's "
                    "history.", sentence, text)
    assert not v.ok and v.reason.startswith("carries a name from other sentences: united states"), v
    # the annotators' own claim: the name qualifies the sentence's description and nothing else is carried
    assert check_claim("Abigail Adams (1797-1801) was a female president of the United States.", sentence,
                       text).ok
    # a pronoun or a replaced description resolved to a name
    arts = ("Dr. Marloes Arts is a social anthropologist. She has published several papers and articles on "
            "these topics.")
    assert check_claim("Dr. Marloes Arts has published several papers and articles on these topics.",
                       "She has published several papers and articles on these topics.", arts).ok
    assert check_claim("The SM U-30 was armed with a 88 mm deck gun.", SM_S[2], SM).ok
    gp = ("The 1932 Australian Grand Prix was a motorsport race. The race was a handicap race which allowed "
          "slower cars to start ahead of faster ones.")
    assert check_claim("The 1932 Australian Grand Prix was a handicap race.",
                       "The race was a handicap race which allowed slower cars to start ahead of faster "
                       "ones.", gp).ok
    # a common word the claim capitalises is not a name; an acronym stands for its sentence's name
    cash = ("According to the International Trade Centre, the global cashmere production is around 20,000 "
            "metric tons per year. However, the production quantity can vary greatly depending on weather "
            "conditions and other factors.")
    assert check_claim("The Cashmere production quantity can vary greatly depending on weather conditions.",
                       "However, the production quantity can vary greatly depending on weather conditions "
                       "and other factors.", cash).ok
    nih = ("Magnesium is a mineral. According to the NIH, adult women need 310-320mg of magnesium a day.")
    assert check_claim("According to the National Institutes of Health, adult women need 310-320mg of "
                       "magnesium a day.", "According to the NIH, adult women need 310-320mg of magnesium a "
                       "day.", nih + " The National Institutes of Health (NIH) is a US agency.").ok


def test_a_program_disclaimer_with_its_cutoff_date_and_a_pointer_to_sources_hold_no_claim():
    from veracity.check.opinions import sentence_rule
    # seed 765's sentences (the hand-read's disclaimer, and a sentence sending the reader elsewhere)
    assert sentence_rule("As an AI language model, I do not have access to current information and news "
                         "beyond my knowledge cutoff in September 2021, and I don't have specific knowledge "
                         "of individuals and their work unless they are widely recognized.") == (
        "not_a_claim", "the writer speaks of itself")
    assert sentence_rule("For the most up-to-date and accurate information on China's gold medal count in "
                         "the Olympic Games, I recommend referring to official Olympic websites or reputable "
                         "sports news sources.") == ("not_a_claim", "refers the reader to other sources")
    for fact in ("As of my knowledge cutoff in September 2021, Blackpink has released four albums.",
                 "As an AI language model, I cannot browse, but the Eiffel Tower is 330 m tall.",
                 "I recommend visiting the Louvre, which holds the Mona Lisa."):
        assert sentence_rule(fact) is None, fact
    # a list's introduction is not a claim of the sentence before it (seed 765, run B)
    v = check_claim("The four female presidents were:", "There have been only four female presidents of the "
                    "United States, so it is difficult to determine an average height for this group.",
                    "There have been only four female presidents of the United States, so it is difficult to "
                    "determine an average height for this group. The four female presidents were: 1.Abigail")
    assert not v.ok and v.reason == "is not a full sentence (ends with ':')", v


def test_words_found_only_in_later_sentences_are_a_later_sentences_claim():
    # seed 765, run B, replayed: the hand-read's one copy (the sentence after says "It is also known as ...")
    text = ("The most common air or gas mixture used in recreational scuba diving is compressed air, which "
            "consists of approximately 21% oxygen and 79% nitrogen. It is also known as standard air or "
            "atmospheric air.")
    sentence = text.split(". ")[0] + "."
    v = check_claim("Compressed air is also known as standard air or atmospheric air.", sentence, text)
    assert not v.ok and v.reason == "carries words from later sentences: standard, atmospheric", v
    assert check_claim("Compressed air consists of approximately 21% oxygen and 79% nitrogen.", sentence,
                       text).ok
    # one later word may be the sentence's own in another form ("controlled" / "control", seed 765)
    stars = ("These elements and processes are controlled by the laws of physics and chemistry. Different "
             "genes control the production of proteins.")
    assert check_claim("The laws of physics and chemistry control these elements and processes.",
                       stars.split(". ")[0] + ".", stars).ok
    # one later word is enough when it is not the sentence's own in another form (seeds 8422 and 4058's
    # hand-reads: the next sentence's fact, and a word that changes the sentence's)
    falcon = ("The fastest animal with wings and fur is the peregrine falcon. It is the fastest animal in "
              "the world, capable of reaching speeds of over 240 miles per hour when diving.")
    first = falcon.split(". ")[0] + "."
    v = check_claim("The peregrine falcon is the fastest animal in the world.", first, falcon)
    assert not v.ok and v.reason == "carries words from later sentences: world", v
    assert check_claim("The peregrine falcon is the fastest animal with wings and fur.", first, falcon).ok
    gold = ("Gold is a noble metal, meaning it is resistant to most chemical reactions, including reactions "
            "with hydrochloric acid (HCl). When gold is exposed to hydrochloric acid alone, there is no "
            "observable chemical reaction.")
    v = check_claim("Gold is resistant to reactions with hydrochloric acid alone.", gold.split(". ")[0] + ".",
                    gold)
    assert not v.ok and "alone" in v.reason, v


def test_a_claim_cut_mid_phrase_is_a_fragment_and_an_object_pronoun_last_is_not():
    # seed 758's hand-read, traced by replaying the extractor at seed 0: the re-ask's own reply cut the claim
    # at "at the", and the first reply split its sentence in a clause ("... completes or is" / "completed
    # with ...")
    sentence = ("Thus, a typical advantage of single-cell multiomics is the ability to identify "
                "heterogeneity within a population of cells, uncovering previously hidden cellular subtypes "
                "and dynamic processes at the single-cell level.")
    v = check_claim("A typical advantage of single-cell multiomics is the ability to identify heterogeneity "
                    "within a population of cells, uncovering previously hidden cellular subtypes and "
                    "dynamic processes at the.", sentence, sentence)
    assert not v.ok and v.reason == "is not a full sentence (ends with 'the')", v
    scala = ("The main difference is that onComplete takes a callback which gets executed when the Future "
             "completes either successfully or with an exception.")
    v = check_claim("The main difference is that onComplete takes a callback which gets executed when the "
                    "Future completes or is.", scala, scala)
    assert not v.ok and v.reason == "is not a full sentence (ends with 'or is')", v
    # an object pronoun, a number or a name last is a whole sentence
    assert fragment("In 1895 Pierre Curie married her.") == ""
    assert fragment("Pierre Curie married Marie in 1895.") == ""
    assert check_claim("Marie Curie was born in Warsaw.", "Marie Curie was born in Warsaw.",
                       "Marie Curie was born in Warsaw.").ok


ECHARTS = ("ECharts Java is a Java-based library for data visualization. It is based on the ECharts "
           "JavaScript library and provides a Java API for creating charts.")


def test_a_name_the_text_writes_only_after_the_sentence_is_a_later_sentences():
    # seeds 5911 and 3937's hand-reads: the next sentence's fact under the first, its one foreign word a name
    # beside the sentence's own "ECharts"
    first, second = "ECharts Java is a Java-based library for data visualization.", ECHARTS.split(". ", 1)[1]
    v = check_claim("ECharts Java is based on the ECharts JavaScript library.", first, ECHARTS)
    assert not v.ok and v.reason == "carries a name from later sentences: JavaScript", v
    assert check_claim("ECharts Java is based on the ECharts JavaScript library.", second, ECHARTS).ok
    # a name from before is an antecedent still
    assert check_claim("Marie Curie won two Nobel Prizes.", "Curie won two Nobel Prizes.",
                       "Marie Curie was a physicist. Curie won two Nobel Prizes.").ok


def test_a_claim_that_is_another_sentence_word_for_word_fails():
    # seed 3356's hand-read: the response's first sentence given as a claim of its third, through antecedent
    # names alone
    third = ("Therefore, in 1980, Justice Douglas was still alive and would have been the oldest serving "
             "justice on the Court at that time.")
    text = ("In 1980, the oldest justice on the United States Supreme Court was Justice William O. Douglas. "
            "He was born on October 16, 1898. " + third)
    v = check_claim("In 1980, the oldest justice on the United States Supreme Court was Justice William O. "
                    "Douglas.", third, text)
    assert not v.ok and v.reason == "is another sentence of the text, word for word", v
    # its own sentence, whole, stays a claim; so does the sentence's fact in the sentence's words
    assert check_claim(third, third, text).ok
    assert check_claim("In 1980, Justice William O. Douglas was still alive.", third, text).ok


def test_a_reply_that_starts_copying_other_sentences_is_cut_there(tmp_path):
    """On llama-server the extractor's reply streams and ends at its first claim that is another sentence's
    altogether (here sentence 1 word for word): the copies after it are never generated, the guard refuses
    that one claim and the re-ask names it alone. Read whole (vLLM), the same reply costs every copy and
    names them all."""
    copying = {"claims": ["Marie Curie was born in Warsaw in 1867.",
                          "Marie Curie married Pierre Curie in 1895.", "The Great Wall of China is long."]}

    def run(streams: bool):
        asked: list[str] = []

        def extractor(m):
            sent = m[1]["content"].split("Sentence to split:\n", 1)[1]
            if len(m) > 2:
                asked.append(m[-1]["content"])
                return {"claims": ["Marie Curie won the Nobel Prize in Chemistry in 1911."]}
            if sent == S[2]:
                return copying
            return {"claims": [sent.replace("She ", "Marie Curie ").replace("The wall",
                                                                            "The Great Wall of China")]}

        llm = ScriptedLLM({"check.extractor": extractor,
                           "check.worthiness": lambda m: {"kind": "checkable_statement"},
                           "direct.judge": lambda m: {"explanation": "ok", "label": "SUPPORTED"}},
                          streams=streams)
        cv = ClaimVerifier(Verifier(method="direct", llm=llm, state_dir=tmp_path / str(streams)))
        return asyncio.run(check_text(BIO, cv, tid="t")), asked, llm

    rec, asked, llm = run(streams=True)
    assert [c["text"] for c in rec["sentences"][2]["claims"]] == [
        "Marie Curie won the Nobel Prize in Chemistry in 1911."]
    assert len(llm.cuts) == 1 and llm.cuts[0][2] == '{"claims": ["Marie Curie was born in Warsaw in 1867."]}'
    cuts = [e for e in rec["extraction_trace"]["events"] if e["kind"] == "check.reply_cut"]
    assert cuts == [{"kind": "check.reply_cut", "sentence": 3, "attempt": 1,
                     "at": "Marie Curie was born in Warsaw in 1867."}]
    assert len(asked) == 1 and "Warsaw" in asked[0] and "married" not in asked[0]
    assert [d["claim"] for d in rec["dropped"]] == ["Marie Curie was born in Warsaw in 1867."]

    whole, asked, llm = run(streams=False)
    assert llm.cuts == [] and "married" in asked[0]
    assert [c["text"] for c in whole["sentences"][2]["claims"]] == [
        "Marie Curie won the Nobel Prize in Chemistry in 1911."]
    assert len(whole["dropped"]) == 3


def test_the_claims_of_a_reply_so_far_are_those_whose_quote_has_closed():
    from veracity.check.extract import complete_claims

    assert complete_claims('{"claims": ["') == []
    assert complete_claims('{"claims": ["A is B.", "C \\"quoted\\" is') == ["A is B."]
    assert complete_claims('{"claims": ["A is B.", "C \\"q\\" is D."') == ["A is B.", 'C "q" is D.']
    assert complete_claims('{"claims": ["A is B.", "C is D."]}') == ["A is B.", "C is D."]
    assert complete_claims('{"claims"') == []
