"""The catalog of edge cases: one name for each, shared by the Hypothesis generators (properties/inputs/strategies.py)
and the fixed adversarial row families (properties/inputs/families.py). Each names its edge cases from here, so the
two never drift apart; ``require`` refuses a name the catalog lacks."""

EDGE_CASES = {
    "tie_within_lane": "exact ties among the 8 experts one lane holds, ranked inside the top 8",
    "tie_across_lanes": "exact ties between experts of different lanes (and within one lane's experts)",
    "tie_at_eighth_place": "clear winners, then an exact tie straddling the 8th and 9th places",
    "all_equal": "all 256 experts of a row equal, any value, infinities included",
    "rounding_tie": "distinct logits whose s + bias round to one value",
    "near_ties": "logits a few ulps apart: equal or adjacent sigmoids",
    "subnormal_values": "subnormal logits (s = 0.5 exactly) and biases (absorbed by s), scores that are subnormal",
    "signed_zeros": "+0.0 and -0.0 side by side in the logits and the bias",
    "minus_inf_bias": "-inf bias on some or most experts: the picks reach into -inf",
    "minus_inf_bias_on_all": "-inf bias on every expert: every score is -inf",
    "infinite_logits": "+inf logits (s = 1) and -inf logits (s = 0)",
    "negative_saturation": "logits where div.full scales its operands (g < -87.3) and where 2^t overflows "
                           "(g <= -88.7, s = 0)",
    "div_full_scaling": "logits below about -87.34, where div.full scales its operands by 0.25",
    "ex2_overflow": "logits at or below about -88.72, where 2^t overflows and s = 0",
    "saturated_score": "large positive logits, where s is exactly 1 or just below it",
    "bias_dominates": "biases large enough to order the experts; s only breaks the ties they leave",
    "random_bits": "uniformly random non-NaN bit patterns",
    "testfloat_patterns": "TestFloat-style exponent x significand patterns",
    "weight_overflow": "tiny scores with a huge scale: the renormalized weights overflow",
    "shared_experts": "every token picks the same 8 experts: the most tokens per expert",
    "typical": "router-like logits and bias, no edge case planted",
}


def require(names, where):
    """``names`` unchanged; ValueError naming ``where`` and the first name the catalog lacks."""
    for name in names:
        if name not in EDGE_CASES:
            raise ValueError(f"{where}: edge case {name!r} is not in properties/inputs/edge_cases.py's catalog")
    return names
