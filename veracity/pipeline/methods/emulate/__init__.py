"""EMULATE (Hong, Luo, Wan): seven agents emulating a person who searches the web and reads pages.

``roles.py`` declares the seven agents, ``method.py`` holds the parameters and the algorithm of
Figure 1, ``search.py`` the search results and web pages on the local index.
"""

from __future__ import annotations

from veracity.pipeline.confidence import ConfidenceRule
from veracity.pipeline.methods.base import MethodSpec
from veracity.pipeline.methods.emulate.method import EmulateParams, verify_emulate
from veracity.pipeline.methods.emulate.roles import (ADDITIONAL_QUERY_GEN, CLASSIFIER, DET_HELPFUL,
                                                     EMULATE_SYSTEM, INITIAL_QUERY_GEN, ROLES, SEARCH_RANK,
                                                     SELF_CONTAINED_CHECK, SUFFICIENT_EVIDENCE,
                                                     Classification,
                                                     Helpful, QueryList, Ranking, SelfContained, Sufficient)
from veracity.pipeline.methods.emulate.search import (Page, SearchResult, apply_ranking, group_results,
                                                      open_result)

SPEC = MethodSpec(
    name="emulate",
    fn=verify_emulate,
    params_cls=EmulateParams,
    summary="EMULATE: seven agents emulating a person searching and reading (4 queries x 2 results).",
    roles=ROLES,
    confidence=ConfidenceRule(("emulate.classifier",), {"True": "SUPPORTED", "False": "REFUTED"},
                              summary="the Classifier's True / False probability (True -> SUPPORTED)"),
    paper="emulate.txt",
)

__all__ = ["ADDITIONAL_QUERY_GEN", "CLASSIFIER", "DET_HELPFUL", "EMULATE_SYSTEM", "INITIAL_QUERY_GEN",
           "SEARCH_RANK", "SELF_CONTAINED_CHECK", "SPEC", "SUFFICIENT_EVIDENCE", "Classification",
           "EmulateParams", "Helpful", "Page", "QueryList", "Ranking", "SearchResult", "SelfContained",
           "Sufficient", "apply_ranking", "group_results", "open_result", "verify_emulate"]
