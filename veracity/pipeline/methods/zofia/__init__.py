"""ZoFia (Wu et al.): entity-guided retrieval, then multi-agent analysis and an adversarial debate.

``roles.py`` declares the roles (prompts next to output models), ``method.py`` holds the parameters, the
run state (:class:`ZofiaState`: the SBERT encoder and the NER model) and the algorithm (Algorithms 1-3),
``keywords.py`` the stage-1 maths that needs no LLM (dynamic threshold, Hierarchical Saliency, SC-MMR,
disambiguation), ``ner.py`` the supervised entity extractor on the packaged spaCy model (eqs. 1-2).
"""

from __future__ import annotations

from veracity.pipeline.confidence import ConfidenceRule
from veracity.pipeline.methods.base import MethodSpec
from veracity.pipeline.methods.zofia.method import (
    ZofiaParams,
    ZofiaState,
    evidence_pool,
    relevant_chunks,
    verify_zofia,
    web_search,
)
from veracity.pipeline.methods.zofia.roles import (
    LINGUIST_DIMENSIONS,
    ROLES,
    ClaimVerification,
    DebateArgument,
    DebateDecision,
    DirectDecision,
    ExtractedClaims,
    ExtractedEntities,
    LinguistAnalysis,
)

SPEC = MethodSpec(
    name="zofia",
    fn=verify_zofia,
    params_cls=ZofiaParams,
    summary="ZoFia: entity-guided retrieval (saliency + SC-MMR), linguist/expert/claim agents, pro-con "
            "debate with a judge.",
    roles=ROLES,
    confidence=ConfidenceRule(("zofia.judge",), {"R": "SUPPORTED", "F": "REFUTED", "I": "NOT_ENOUGH_INFO",
                                                 "REAL": "SUPPORTED", "FAKE": "REFUTED"},
                              summary="the last judge ruling's probabilities (R -> SUPPORTED, F -> REFUTED, "
                                      "I (go on) -> NOT_ENOUGH_INFO)"),
    state_cls=ZofiaState,
    paper="zofia.txt",
)

__all__ = ["LINGUIST_DIMENSIONS", "SPEC", "ClaimVerification", "DebateArgument", "DebateDecision",
           "DirectDecision",
           "ExtractedClaims", "ExtractedEntities", "LinguistAnalysis", "ZofiaParams", "ZofiaState",
           "evidence_pool",
           "relevant_chunks", "verify_zofia", "web_search"]
