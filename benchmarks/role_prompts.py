"""Every role's rendered messages on fixed inputs, hashed: the before/after proof of a prompt refactor.

Each case renders one role's full message list the way its method starts the call (``ROLE.messages(...)``;
for a role that continues another role's conversation, that conversation plus the role's own turn), and
prints ``name  md5(messages)  md5(system message)  md5(non-system messages)`` per case. Run it on two
checkouts and diff the outputs::

    PYTHONPATH=/path/to/checkout python benchmarks/role_prompts.py > hashes.txt

``--show CASE`` prints one case's messages in full.
"""

from __future__ import annotations

import argparse
import hashlib
import json

from veracity.pipeline.labels import BINARY, THREE_WAY
from veracity.pipeline.methods import direct, rag
from veracity.pipeline.methods.emulate import roles as em
from veracity.pipeline.methods.emulate.search import Page, SearchResult
from veracity.pipeline.methods.mermaid import roles as me
from veracity.pipeline.methods.trification import roles as tr
from veracity.pipeline.methods.trification.graph import NodeSpec
from veracity.pipeline.methods.trification.method import NodeRun
from veracity.pipeline.methods.zofia import roles as zo
from veracity.pipeline.tools import SourceIdentity
from veracity.pipeline.types import Claim, Evidence

CLAIM = Claim("c1", "The Amazon River flows into the Pacific Ocean.")
DATED = Claim("c2", "Marie Curie won two Nobel Prizes.", date="2020-05-01")
P1 = Evidence("Amazon River#0", "Amazon River", "The Amazon River in South America is the largest river by "
              "discharge volume of water in the world, and flows into the Atlantic Ocean.", 3.5)
P2 = Evidence("Pacific Ocean#1", "Pacific Ocean",
              "The Pacific Ocean is the largest and deepest of Earth's five "
              "oceanic divisions.", 2.0)
PASSAGES = [P1, P2]


def _node(id_: str, type_: str, output: str = "", **kw) -> NodeRun:
    run = NodeRun(NodeSpec(id_, type_, f"input of {id_}", f"hint of {id_}"), input=f"input of {id_}",
                  output=output, **kw)
    return run


def cases() -> dict[str, list[dict[str, str]]]:
    search = _node("n1", "SEARCH", "the river reaches the Atlantic", queries=["Amazon mouth"],
                   synthesized=True)
    think = _node("n2", "THINK", "it flows east")
    judge = _node("n3", "JUDGE")
    bank = [Page("Amazon River", [P1]), Page("Pacific Ocean", [P2])]
    results = [SearchResult("Amazon River", "The Amazon River in South America", P1)]
    source = SourceIdentity("enwiki.xml.bz2", "2024-01-01", "bm25")
    decomposition = me.Decomposition(triplets=[me.Triplet(subject="Amazon River", relation="flows into",
                                                          object="Pacific Ocean", attributions=[])],
                                     keywords=["Amazon River"], domain="geography")
    out: dict[str, list[dict[str, str]]] = {}
    for space in (THREE_WAY, BINARY):
        tag = space.name
        out[f"direct.judge/{tag}"] = direct.JUDGE.messages(claim=CLAIM, space=space)
        out[f"direct.judge/{tag}/dated"] = direct.JUDGE.messages(claim=DATED, space=space)
        out[f"rag.judge/{tag}"] = rag.JUDGE.messages(claim=CLAIM, passages=PASSAGES, max_words=150,
                                                     space=space)
        out[f"rag.judge/{tag}/short"] = rag.JUDGE.messages(claim=DATED, passages=PASSAGES, max_words=5,
                                                           space=space)
        opening = me.EXECUTOR.messages(claim=CLAIM, decomposition=decomposition, recalled=[P2], t_max=5,
                                       max_words=150, space=space)
        out[f"mermaid.executor/{tag}"] = opening
        out[f"mermaid.executor/{tag}/bare"] = me.EXECUTOR.messages(claim=DATED, decomposition=None,
                                                                   recalled=[],
                                                                   t_max=3, max_words=150, space=space)
        conversation = [*opening, {"role": "assistant", "content": '{"action": "search"}'},
                        me.observation_message("[Amazon River#0] Amazon River\n...", 1, 5)]
        out[f"mermaid.final/{tag}"] = final_messages(conversation)
    out["rag.select"] = rag.SELECT.messages(claim=CLAIM, passages=PASSAGES, max_words=150)
    out["mermaid.decomposer"] = me.DECOMPOSER.messages(claim=CLAIM)
    out["emulate.initial_query_gen"] = em.INITIAL_QUERY_GEN.messages(claim=CLAIM)
    out["emulate.search_rank"] = em.SEARCH_RANK.messages(claim=CLAIM, query="Amazon mouth", results=results,
                                                         source=source)
    out["emulate.search_rank/nosource"] = em.SEARCH_RANK.messages(claim=DATED, query="q", results=results)
    out["emulate.self_contained_check"] = em.SELF_CONTAINED_CHECK.messages(claim=CLAIM, bank=bank[:1],
                                                                           page=bank[1])
    out["emulate.det_helpful"] = em.DET_HELPFUL.messages(claim=CLAIM, bank=bank[:1], page=bank[1])
    out["emulate.sufficient_evidence"] = em.SUFFICIENT_EVIDENCE.messages(claim=CLAIM, bank=bank)
    out["emulate.classifier"] = em.CLASSIFIER.messages(claim=CLAIM, bank=bank)
    out["emulate.classifier/knowledge"] = em.CLASSIFIER.messages(claim=CLAIM, bank=bank, use_knowledge=True)
    out["emulate.additional_query_gen"] = em.ADDITIONAL_QUERY_GEN.messages(claim=CLAIM, bank=[])
    for allowed in (tr.NODE_TYPES, ("SEARCH", "JUDGE")):
        for reasoning in (True, False):
            tag = f"{'+'.join(allowed)}/{reasoning}"
            out[f"trification.planner/{tag}"] = tr.PLANNER.messages(claim=DATED, allowed=allowed, max_nodes=8,
                                                                    reasoning=reasoning)
            out[f"trification.modify/{tag}"] = tr.MODIFY.messages(claim=CLAIM, allowed=allowed, max_nodes=4,
                                                                  failed=judge, reusable=[search, think],
                                                                  reasoning=reasoning)
    out["trification.search"] = tr.SEARCH.messages(node=search, parents=[think], max_queries=3)
    out["trification.synthesize"] = tr.SYNTHESIZE.messages(node=search, shown=PASSAGES, max_words=150)
    out["trification.refine"] = tr.REFINE.messages(node=think, parents=[search], shown=PASSAGES,
                                                   max_words=150)
    out["trification.think"] = tr.THINK.messages(claim=CLAIM, node=think, parents=[search], shown=PASSAGES,
                                                 max_words=150)
    out["trification.judge"] = tr.JUDGE.messages(claim=CLAIM, node=judge, parents=[search, think], shown=[P1],
                                                 max_words=20)
    out["zofia.entities"] = zo.ENTITIES.messages(text=CLAIM.text)
    out["zofia.linguist"] = zo.LINGUIST.messages(text=CLAIM.text, dimension="Emotion", headline="Big news")
    out["zofia.linguist/nohead"] = zo.LINGUIST.messages(text=CLAIM.text, dimension="Word")
    out["zofia.expert_triage"] = zo.EXPERT_TRIAGE.messages(text=CLAIM.text)
    out["zofia.expert"] = zo.EXPERT.messages(text=CLAIM.text, expert_role="geographer", wiki=[P1])
    out["zofia.expert/blank"] = zo.EXPERT.messages(text=CLAIM.text, expert_role="  ", wiki=[])
    out["zofia.claim_extractor"] = zo.CLAIM_EXTRACTOR.messages(text=CLAIM.text)
    out["zofia.claim_verifier"] = zo.CLAIM_VERIFIER.messages(claim=CLAIM.text, context=[("flows east", P1)])
    argument = zo.DebateArgument(rebuttal="no", points=["the Atlantic (Amazon River)"])
    out["zofia.pro"] = [*zo.PRO.messages(), zo.pro_turn("pool", 1, None)]
    out["zofia.con"] = [*zo.CON.messages(), zo.con_turn("pool", 1, argument)]
    out["zofia.judge"] = zo.JUDGE.messages(pool="pool", history=[(argument, argument)] * 2, max_rounds=5)
    out["zofia.judge/pool"] = zo.JUDGE.messages(pool="pool", history=[(argument, argument)], max_rounds=3,
                                                show_pool=True)
    out["zofia.judge/direct"] = zo.DIRECT_JUDGE.messages(pool="pool")
    # quotes=show|check (veracity's switch; a checkout without it has no case)
    if hasattr(zo, "QuotedDebateDecision"):
        out["zofia.judge/quotes"] = zo.JUDGE.messages(pool="pool", history=[(argument, argument)],
                                                      max_rounds=5,
                                                      passages=PASSAGES, quoting=True)
        out["zofia.judge/direct/quotes"] = zo.DIRECT_JUDGE.messages(pool="pool", passages=PASSAGES,
                                                                    quoting=True)
    return out


def final_messages(conversation: list[dict[str, str]]) -> list[dict[str, str]]:
    """mermaid.final's messages as the method sends them: the executor's conversation, then FINAL's turn."""
    if hasattr(me, "final_turn"):  # one prompt per role: FINAL renders its own turn only
        return [*conversation, *me.FINAL.render()]
    return me.FINAL.messages(conversation=conversation)


def md5(obj: object) -> str:
    return hashlib.md5(json.dumps(obj, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()[:12]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--show", help="print this case's messages in full")
    args = ap.parse_args()
    all_cases = cases()
    if args.show:
        print(json.dumps(all_cases[args.show], indent=1, ensure_ascii=False))
        return
    for name, msgs in all_cases.items():
        system = [m for m in msgs if m["role"] == "system"]
        rest = [m for m in msgs if m["role"] != "system"]
        print(f"{name:48} {md5(msgs)} {md5(system)} {md5(rest)}")


if __name__ == "__main__":
    main()
