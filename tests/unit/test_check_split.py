"""Claims the extractor left as their sentence, split without a model (veracity.check.split; issue 44
point 1). The sentences are seed 765's and seed 11's (development data, BENCHMARKS.md)."""

from __future__ import annotations

import asyncio

from tests.unit.scripted_llm import ScriptedLLM
from veracity.check.split import clean, split_claim, split_claims

PIG = ("So, while a pig has 38 chromosomes in each of its cells, there are no chromosomes in a pork chop "
       "that you might buy at the grocery store or order at a restaurant.")
STARS = ("This may seem like a small number, but keep in mind that the Milky Way is a vast galaxy with "
         "billions of stars, so even a small number of new stars added each year can add up quickly.")
FINS = "The fins, which help control the board in the water, are typically made of plastic or fiberglass."
SANK = ("It sank a total of 42 ships during its service, but was eventually sunk by the British submarine "
        "E22 on August 4, 1915, with the loss of all hands.")


def test_a_concessive_clause_a_subject_relative_and_two_main_clauses_are_claims_of_their_own():
    assert split_claim(PIG) == ["A pig has 38 chromosomes in each of its cells.",
                                "There are no chromosomes in a pork chop that you might buy at the grocery "
                                "store or order at a restaurant."]
    assert split_claim(FINS) == ["The fins help control the board in the water.",
                                 "The fins are typically made of plastic or fiberglass."]
    assert split_claim(STARS) == ["This may seem like a small number.",
                                  "The Milky Way is a vast galaxy with billions of stars.",
                                  "Even a small number of new stars added each year can add up quickly."]


def test_what_would_not_be_a_sentence_is_left_whole():
    assert split_claim(SANK) == [SANK]  # "was eventually sunk ..." has no subject of its own
    assert split_claim("While in Paris, he met Sartre.") == ["While in Paris, he met Sartre."]
    # a purpose is not a second claim, a choice ("or") is not one claim per item
    assert split_claim("He saved money, so that he could buy a house in the city.") == [
        "He saved money, so that he could buy a house in the city."]
    assert split_claim("Fins can be made of plastic, wood, or metal.") == [
        "Fins can be made of plastic, wood, or metal."]
    # a list inside the claim, or of long items, is not split
    assert split_claim("Firms advertise to provide information about product features, benefits, and "
                       "availability, and to create brand loyalty.") == [
        "Firms advertise to provide information about product features, benefits, and availability, and to "
        "create brand loyalty."]


def test_a_list_that_ends_the_claim_is_one_claim_per_item():
    # seed 11's sentences, which the annotators split item by item
    assert split_claim("Bristly Bellflowers are typically found in the temperate regions of Europe, Asia, "
                       "and North America.") == [
        "Bristly Bellflowers are typically found in the temperate regions of Europe.",
        "Bristly Bellflowers are typically found in the temperate regions of Asia.",
        "Bristly Bellflowers are typically found in the temperate regions of North America."]
    found = split_claim("Bristly Bellflowers are found in fields, meadows, forests, and along roadsides.")
    assert found[-1] == "Bristly Bellflowers are found along roadsides."  # the item's own preposition


def test_a_verb_phrase_after_a_comma_and_is_no_list_item():
    # seed 5911's hand-read: "operates at peak optimization, and is regularly maintained and improved" was cut
    # into "... operates at and is regularly maintained." and "... operates at improved."
    whole = ("It operates at peak optimization, and is regularly maintained and improved.")
    assert split_claim(whole) == [whole]
    assert split_claim("It was tested in Paris, Rome, and was shipped in May.") == [
        "It was tested in Paris, Rome, and was shipped in May."]
    assert len(split_claim("The shop sells products such as snacks, beverages, toiletries, and other daily "
                           "essentials.")) == 5  # a list of noun phrases is still split (and the statement)


def test_examples_after_such_as_or_including_are_the_statement_and_one_claim_each():
    # seed 5911's development rows: the annotators wrote "Epigenetic changes can be caused by various
    # environmental factors." and "Diet is an environmental factor that can cause epigenetic changes." (and
    # one for stress, one for toxins); here an "or" lists examples, it is no choice
    assert split_claim("Epigenetic changes can be caused by various environmental factors, such as diet, "
                       "stress, or exposure to toxins.") == [
        "Epigenetic changes can be caused by various environmental factors.",
        "Epigenetic changes can be caused by various environmental factors, such as diet.",
        "Epigenetic changes can be caused by various environmental factors, such as stress.",
        "Epigenetic changes can be caused by various environmental factors, such as exposure to toxins."]
    assert split_claim("It is used in many fields including medicine and law.") == [
        "It is used in many fields.", "It is used in many fields including medicine.",
        "It is used in many fields including law."]
    # not: a choice without "such as", a statement too short to stand alone, examples inside the claim
    assert split_claim("Fins can be made of plastic, wood, or metal.") == [
        "Fins can be made of plastic, wood, or metal."]
    assert split_claim("He likes fruits such as apples or pears.") == [
        "He likes fruits such as apples or pears."]
    assert split_claim("Big cats, such as lions and tigers, live in Africa.") == [
        "Big cats, such as lions and tigers, live in Africa."]


def test_list_numbers_citations_markers_and_a_titles_dash_are_cleaned():
    assert clean("According to the original LLaMa paper (https://arxiv.org/abs/2012.15730), the largest "
                 "version of LLaMa trained by the authors has 4.5 billion parameters.") == (
        "According to the original LLaMa paper, the largest version of LLaMa trained by the authors has 4.5 "
        "billion parameters.")
    assert clean('2. “Square Two" (2016) - This is their second single album, featuring the songs "Playing '
                 'with Fire" and "Stay."') == ('“Square Two" (2016) is their second single album, featuring '
                                               'the songs "Playing with Fire" and "Stay."')
    assert clean("However, it's important to note that medal counts can change with each edition of the "
                 "Olympic Games.") == "Medal counts can change with each edition of the Olympic Games."
    assert clean("Water boils at 100 degrees [3].") == "Water boils at 100 degrees."


def test_pieces_are_read_against_the_sentence_guard():
    text = "A pig is an animal. " + PIG
    assert split_claims([PIG], PIG, text) == split_claim(PIG)
    # a piece the guard refuses is left out; a claim none of whose pieces passes is kept as it was
    assert split_claims(["Marie Curie was born in Warsaw."], PIG, text) == ["Marie Curie was born in Warsaw."]


def test_the_extractors_whole_sentence_is_split_in_check(tmp_path):
    from veracity.check.extract import Sentence, claims_in_sentence
    from veracity.pipeline.methods.base import MethodContext
    from veracity.pipeline.types import Trace

    llm = ScriptedLLM({"check.extractor": lambda m: {"claims": [FINS]}})
    trace = Trace()
    ctx = MethodContext(llm=llm, tools=None, trace=trace, params=None, seed=None, claim_id="x")
    kept, lost = asyncio.run(claims_in_sentence(ctx, FINS, Sentence(1, 0, len(FINS), FINS), trace))
    assert kept == split_claim(FINS) and lost == []


def test_claims_split_past_the_per_sentence_limit_are_dropped_and_counted_not_lost(tmp_path):
    from veracity.check.extract import Sentence, claims_in_sentence
    from veracity.check.roles import MAX_CLAIMS_PER_SENTENCE
    from veracity.pipeline.methods.base import MethodContext
    from veracity.pipeline.types import Trace

    # six claims from the extractor, the first a list of four: nine claims once split
    sentence = ("Marie Curie was a physicist, a chemist, a teacher and a mother, she was born in Warsaw, "
                "she studied in Paris, she won two Nobel prizes, she discovered polonium, she discovered "
                "radium and she died in 1934.")
    claims = ["Marie Curie was a physicist, a chemist, a teacher and a mother.",
              "Marie Curie was born in Warsaw.", "Marie Curie studied in Paris.",
              "Marie Curie won two Nobel prizes.", "Marie Curie discovered polonium.",
              "Marie Curie discovered radium."]
    llm = ScriptedLLM({"check.extractor": lambda m: {"claims": claims}})
    trace = Trace()
    ctx = MethodContext(llm=llm, tools=None, trace=trace, params=None, seed=None, claim_id="x")
    whole = Sentence(0, 0, len(sentence), sentence)
    kept, lost = asyncio.run(claims_in_sentence(ctx, sentence, whole, trace))
    assert len(kept) == MAX_CLAIMS_PER_SENTENCE and kept[0] == "Marie Curie was a physicist."
    assert [d["claim"] for d in lost] == ["Marie Curie won two Nobel prizes.",
                                          "Marie Curie discovered polonium.",
                                          "Marie Curie discovered radium."]
    assert all(d["reason"] == "over the limit of 6 claims a sentence" and d["sentence"] == 0 for d in lost)


def test_a_leading_pronoun_is_named_from_the_subject_the_text_gives_it():
    from veracity.check.split import resolve_reference, resolve_references

    # seed 11's sentences: the sentence before names the referent, or the sentence's own first clause does
    arg = "Argentina has won the FIFA world cup once. "
    won = "They won the tournament in 1986, when they defeated West Germany in the final."
    assert resolve_reference("They won the tournament in 1986.", won, arg) == (
        "Argentina won the tournament in 1986.")
    gp = "The 1932 Australian Grand Prix was a motorsport race held on a dirt track circuit. "
    laps = "It was contested over a distance of 40 laps, totaling 160 miles (257.5 km)."
    assert resolve_reference("It was contested over a distance of 40 laps.", laps, gp) == (
        "The 1932 Australian Grand Prix was contested over a distance of 40 laps.")
    assert resolve_reference("They are produced through the expression of specific genes.",
                             "Different types of proteins are necessary for different functions in the body, "
                             "and they are produced through the expression of specific genes.", "") == (
        "Different types of proteins are produced through the expression of specific genes.")
    # seed 765: a possessive, two sentences back (the sentence before starts with "She")
    arts = ("Dr. Marloes Arts is a social anthropologist. She has published several papers and articles on "
            "these topics. ")
    sentence = "Her research has been influential in shaping academic and policy discussions."
    assert resolve_references([sentence], sentence, arts + sentence, arts) == [
        "Dr. Marloes Arts' research has been influential in shaping academic and policy discussions."]
    # nothing to name: an expletive "it", a subject that does not agree, a description for "he"
    assert resolve_reference("It is difficult to determine an average height for this group.",
                             "It is difficult to determine an average height for this group.", arg) == ""
    assert resolve_reference("They allow for abstraction of infrastructure resources.",
                             "They allow for abstraction of infrastructure resources.",
                             "The purpose of using Terraform modules is to create configurations. ") == ""
    assert resolve_reference("He won the race.", "He won the race.", "The driver was fast. ") == ""


def test_a_gold_sentence_edited_by_its_annotators_is_found_in_its_text():
    from veracity.check.extract import Sentence, text_before

    text = ("The 1932 Australian Grand Prix was a motorsport race. It was contested over a distance of 40 "
            "laps, totaling 160 miles (257.5 km), and was a handicap race.")
    # Factcheck-Bench's sentence is the response's, cut by the annotators: not a substring of the text
    edited = "It was contested over a distance of 40 laps, totaling 160 miles (257.5 km)."
    assert text_before(text, Sentence(2, 0, 0, edited)) == text[:text.index("It was")]
    assert text_before(text, Sentence(2, 0, 0, "Nothing of the kind is said here at all.")) == ""
