"""What each measure family is in trec_eval 10.0 and ir_measures 0.4, and what we decided where they
differ: `evalstore measures` prints it. One rule: a name that is trec_eval's gives trec_eval 10.0's
values, an ir_measures spelling gives ir_measures' values, and where the two peers disagree each
definition has a canonical name of its own. "Same values" is checked per topic on real runs
(tests/differential: against the trec_eval and ndeval programs, and against ir_measures)."""

from __future__ import annotations

_SAME = "ir_measures {name}: same values"
_TREC_ONLY = "not in ir_measures 0.4"
_NDEVAL = (
    "ndeval {column}; ir_measures {name} (pyndeval): same values per topic, except that pyndeval breaks ties "
    "in score by docno ascending (evalstore, trec_eval and ndeval -traditional: descending)"
)

PEERS: dict[str, str] = {
    "AP": "trec_eval map, map_cut_k (AP@k); " + _SAME.format(name="AP"),
    "binG": "trec_eval binG; " + _TREC_ONLY,
    "Bpref": "trec_eval bpref; " + _SAME.format(name="Bpref"),
    "DCG": "trec_eval dcg (gain = level, or as given); " + _TREC_ONLY,
    "ERR": "gdeval.pl's ERR@k, as ir_measures ERR@k: same values (to gdeval's 5 printed decimals); grades are "
    "normalised by max_grade=4 as gdeval does; the qrels' own top grade is ERR(max_grade=G); not in trec_eval",
    "F": "F-beta of P@k and R@k; in neither peer (trec_eval's set_F is SetF)",
    "G": "trec_eval G; " + _TREC_ONLY,
    "GM_Bpref": "trec_eval gm_bpref; " + _TREC_ONLY,
    "GMAP": "trec_eval gm_map; " + _TREC_ONLY,
    "IDCG": "trec_eval ideal_dcg; " + _TREC_ONLY,
    "infAP": "trec_eval infAP; " + _SAME.format(name="infAP"),
    "IPrec": "ir_measures IPrec@x: same values (x*R relevant documents counted as pytrec_eval, trec_eval 9.x, "
    "counts: (long)(x*R + 0.9)); trec_eval 10.0's iprec_at_recall_x counts lround(x*R): that one is "
    "IPrec(rounding=trec_eval10)@x, and trec_eval's name means it",
    "IPrecAvg": "trec_eval 11pt_avg (10.0's rounding); " + _TREC_ONLY,
    "Judged": "ir_measures Judged@k: same values where no two documents of a topic tie in score; DIFFERS UNDER "
    "TIES: ir_measures' judged provider breaks ties by docno ascending, evalstore by trec_eval's rule "
    "(docno descending), so the top k can hold other documents (tests/differential/"
    "test_ir_measures_ties.py); not in trec_eval (its unj_k divides the unjudged by k, Judged@k the "
    "judged by min(k, retrieved))",
    "nDCG": "trec_eval ndcg, ndcg_cut_k; " + _SAME.format(name="nDCG@k") + "; nDCG(gain=exp)@k is ir_measures' "
    "nDCG(dcg='exp-log2')@k (gdeval): same values to gdeval's 5 printed decimals",
    "nDCG_rel": "trec_eval ndcg_rel; " + _TREC_ONLY,
    "NumNonRelJudgedRet": "trec_eval num_nonrel_judged_ret; " + _TREC_ONLY,
    "NumQ": "trec_eval num_q; " + _SAME.format(name="NumQ"),
    "NumRel": "trec_eval num_rel; " + _SAME.format(name="NumRel"),
    "NumRelRet": "trec_eval num_rel_ret; " + _SAME.format(name="NumRelRet") + " (also spelt NumRet(rel=r))",
    "NumRet": "trec_eval num_ret; " + _SAME.format(name="NumRet"),
    "P": "trec_eval P_k; " + _SAME.format(name="P@k"),
    "PAtR": "precision where recall first reaches x (Manning et al.); in neither peer",
    "R": "trec_eval recall_k; " + _SAME.format(name="R@k"),
    "RBP": "ir_measures RBP(rel=r) (cwl_eval; binary gains, p=0.8 by default): same values where no two documents "
    "tie in score (cwl_eval breaks ties its own way); without rel, trec_eval's graded rbp (gains min-max "
    "normalised per topic), which ir_measures' default providers do not compute; trec_eval's name rbp means "
    "its default p=0.9, RBP's default p is ir_measures' 0.8",
    "RBP_resid": "trec_eval rbp_resid; " + _TREC_ONLY,
    "RelP": "trec_eval relative_P; " + _TREC_ONLY,
    "RelString": "trec_eval relstring; " + _TREC_ONLY,
    "RnDCG": "trec_eval Rndcg; " + _TREC_ONLY,
    "Rprec": "trec_eval Rprec; " + _SAME.format(name="Rprec"),
    "RprecMult": "trec_eval Rprec_mult; " + _TREC_ONLY,
    "YAAP": "trec_eval yaap (in its measure table, in none of its groups); " + _TREC_ONLY,
    "RR": "trec_eval recip_rank; " + _SAME.format(name="RR") + "; RR@k (MS MARCO's MRR@10) is recip_rank "
    "under trec_eval -M k, and ir_measures RR@k where no two documents of a topic tie in score; RR@k DIFFERS "
    "UNDER TIES: ir_measures computes it with its msmarco provider, which breaks ties by docno ascending, "
    "evalstore by trec_eval's rule (docno descending) (tests/differential/test_ir_measures_ties.py)",
    "SetAP": "trec_eval set_map; " + _SAME.format(name="SetAP"),
    "SetF": "trec_eval set_F; " + _SAME.format(name="SetF") + " (its beta is set_F's x)",
    "SetP": "trec_eval set_P; " + _SAME.format(name="SetP"),
    "SetR": "trec_eval set_recall; " + _SAME.format(name="SetR"),
    "SetRelP": "trec_eval set_relative_P; " + _SAME.format(name="SetRelP"),
    "Success": "trec_eval success_k; " + _SAME.format(name="Success@k") + "; ranx hit_rate@k (spelt HitRate@k "
    "here too): the same definition",
    "Hits": "ranx hits@k: the same definition (a count of relevant documents in the top k); not in trec_eval or "
    "ir_measures. Hits@k in knowledge-graph papers means Success@k: spell that HitRate@k",
    "Unj": "trec_eval unj; " + _TREC_ONLY,
    **{
        name: "in no peer (trec_eval, ir_measures, ranx, trectools): evalstore's, from a second qrels set of what "
        "the user knew (--known)"
        for name in ("Coverage", "Novelty", "RelativeRecall", "RecallEffort")
    },
    "Utility": "trec_eval utility; " + _TREC_ONLY,
    **{
        name: f"ir_measures {name}{spelling} (its cwl_eval provider; cwl_eval's {cwl}): same values per topic where "
        "no two documents of a topic tie in score (cwl_eval keeps tied documents in the run's order; evalstore, "
        "trec_eval's: docno descending); gains are ir_measures' (levels clipped to [min_rel, max_rel], scaled to "
        "[0, 1]; cwl_eval alone reads the qrels' values as gains); not in trec_eval"
        for name, spelling, cwl in (
            ("BPM", "(T, max_rel)@k", "BPM-Static-T-K"),
            ("SDCG", "(max_rel)@k", "NDCG-k"),
            ("INST", "(T, max_rel)", "INST-T"),
            ("INSQ", "(T, max_rel)", "INSQ-T"),
            ("NERR8", "(max_rel)@k", "NERR-EQ8"),
            ("NERR9", "(max_rel)@k", "NERR-EQ9"),
            ("NERR10", "(p, max_rel)", "NERR-EQ10, p its phi"),
            ("NERR11", "(T, max_rel)", "NERR-EQ11"),
        )
    },
    "Compat": "ir_measures Compat(p) (its compat provider, Clarke's compatibility code): same values per topic "
    "where no two documents tie in score and scores are positive; DIFFERS with negative scores: ir_measures "
    "orders the ideal ranking's documents of one level by their scores, an unretrieved one as if it scored 0 "
    "(above every retrieved document of a negative score); evalstore puts the retrieved ones first, in the "
    "ranking's order; not in trec_eval",
    "Accuracy": "ir_measures Accuracy(rel)@k (its accuracy provider): same values per topic where no two documents "
    "tie in score, and no value (NaN, left out of the mean) where ir_measures reports none (no relevant document "
    "retrieved); where the top k holds no non-relevant document, 1 (ir_measures 0.4 divides by zero); not in "
    "trec_eval",
    "alpha_nDCG": _NDEVAL.format(column="alpha-nDCG@k", name="alpha_nDCG@k"),
    "alpha_DCG": _NDEVAL.format(column="alpha-DCG@k", name="alpha_DCG@k"),
    "ERR_IA": _NDEVAL.format(column="ERR-IA@k", name="ERR_IA@k"),
    "nERR_IA": _NDEVAL.format(column="nERR-IA@k", name="nERR_IA@k"),
    "NRBP": _NDEVAL.format(column="NRBP", name="NRBP"),
    "nNRBP": _NDEVAL.format(column="nNRBP", name="nNRBP"),
    "AP_IA": _NDEVAL.format(column="MAP-IA", name="AP_IA"),
    "P_IA": _NDEVAL.format(column="P-IA@k", name="P_IA@k"),
    "StRecall": _NDEVAL.format(column="strec@k", name="StRecall@k"),
    **{
        name: f"trec_eval {name} (-R prefs, -R qrels_prefs); " + _TREC_ONLY
        for name in (
            "prefs_num_prefs_poss",
            "prefs_num_prefs_ful",
            "prefs_num_prefs_ful_ret",
            "prefs_simp",
            "prefs_pair",
            "prefs_avgjg",
            "prefs_avgjg_Rnonrel",
            "prefs_simp_ret",
            "prefs_pair_ret",
            "prefs_avgjg_ret",
            "prefs_avgjg_Rnonrel_ret",
            "prefs_simp_imp",
            "prefs_pair_imp",
            "prefs_avgjg_imp",
        )
    },
}
