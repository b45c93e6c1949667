"""Generated mutants no digest can tell from the kernel and no output can: each keyed by its site (the name
properties/mutants/generate.py gives it), with the reason. properties/mutants/generated.py does not run them;
tests/test_mutants_generated_cpu.py checks that each still names a generated mutant, and the arithmetic some
reasons rest on.
"""

CACHE_SIZE_ONLY = ("CACHE_LIMIT only bounds the checked-call cache's size: the cache starting afresh one signature "
                   "sooner or later changes no call's outcome")
NO_SUCH_TABLE = ("cta_table's value for tiles 1..256 is never 2^31 - 1, 2^31 or 2^31 + 1 (only tile 1's, 0x87654321, "
                 "reaches 2^31), so the comparison with 2^31 made strict decides alike")
WHOLE_WORDS = ("every tensor that reaches the overlap check is 4-byte aligned (the alignment checks come first) and "
               "spans whole 4-byte elements, so a0 and b1 (b0 and a1) differ by a multiple of 4 and x < y - 1 iff x < "
               "y")
UNROLL = ("cutlass.range's unroll factor lays the loop out differently; which iterations run and what they compute "
          "stay")
HEAD_NEVER = ("the extra single store (d = 3) is predicated on start + 3 < body_start, and body_start <= start + 3 "
              "(the next 16-byte boundary, or end when it comes first), so it never runs")
TAIL_NEVER = ("the extra single store (d = 3) is predicated on body_end + 3 < end, and end - body_end <= 3 (body_end "
              "is end rounded down to 16 bytes, or body_start = end when that is past it), so it never runs")
WHOLE_VECTORS = ("the 16-byte loop's indices are body_start plus multiples of 4, and body_end - body_start is a "
                 "multiple of 4 (both 16-byte boundaries, or equal: no iteration), so i < body_end - 1 iff i < "
                 "body_end")
FIFTH_PLANE = ("an expert's CTA count is at most 8 (a nibble of cta_table, bits 0..3), so a fifth bit plane's ballot "
               "is empty and adds 0 to the scan and the total")
NO_TOKENS = ("an expert no token picked has ctas = 0 (the select) and count = 0: its loops run no iteration and its "
             "padding range [first_row, (first + 0) * tile_n) is empty, so entering the block writes nothing")
WARP_UNIFORM = ("warp_total comes from ballots over the whole warp, the same in every lane, so which lanes store it "
                "to sWarpCtas[warp] changes no value")
BLOCK_UNIFORM = ("total sums every warp's sWarpCtas after the barrier, the same in every thread, so which threads "
                 "store the totals changes no value")
ROUTE_UNIFORM = ("every thread's ctas is _picked_below over the shared bitmap of picked local experts, complete "
                 "before any thread reads it, so whichever lanes of whichever token store the totals store the same "
                 "value (token 1 exists: this path runs at b >= 3)")
TWO_TOKEN_UNIFORM = ("either token's warp counts the same CTAs, its own picked local experts plus the other token's "
                     "it did not pick (|A| + |B - A| = |A | B| = |B| + |A - B|), in ballots every lane holds, so "
                     "whichever lanes of either token store the totals store the same value")
ONE_TOKEN_UNIFORM = ("ctas is the popcount of a ballot over the warp, the same in every lane, so whichever lanes "
                     "store the totals store the same value")
DISTINCT_WORDS = ("the words compared are distinct (each holds its own score's shared address in its low half), so "
                  "setp.ge decides as setp.gt does")
ONE_DIMENSION = "the metadata tensor is 1-D (the contract refuses any other), so its shape[-1] is its shape[0]"
EXACT_ALWAYS = ("the exact rounds are exact for every input (the speculative rounds' fall-back): a tie flag that is "
                "never 0, or never the value tested, sends every warp to them, which changes no output, only the time")
SPURIOUS_TIES = ("holders & (holders - 2) is nonzero whenever two or more lanes hold the best key (and for lane 0 "
                 "alone): every real tie still sends the warp to the exact rounds, a spurious one costs only time")
WARP_BARRIER_KEPT = ("the warp barrier still sits between the score stores (_store_scores) and the first score load "
                     "(_weight's, after pick_row returns), the one order it keeps")
PICKS_BARRIER_KEPT = ("the barrier still separates the sPicks stores from write_two_token_metadata's loads; "
                      "_write_weights, now before it, reads only its own warp's scores")
ZEROING_BARRIER_KEPT = ("the barrier still separates the zeroing of sRoutes and sUsed from every warp's atomic_or on "
                        "them; only the bias load no longer overlaps it")
WAIT_KEPT = ("the wait still follows the bias load and precedes every logits load and global write; only the barrier "
             "now follows it")
EXPERT_SET_FIRST = ("expert is read only by a warp with a row (write_route_metadata under warp < rows), which sets it "
                    "in pick_row first: the initial value is never read")
BIAS_BY_ADDRESS = ("the kernel reads the bias through its base address alone (load_lane at mBias.iterator plus the "
                   "lane's offset), never through the tensor's layout")
IMPLIED_BOUND = ("the term x < num_local is implied by the x < local beside it: the count it feeds is read only by a "
                 "lane whose own local lies in [0, num_local) (write_route's guard), so x < local < num_local, and "
                 "x <= num_local decides alike")
WARM_UP_COVERS = ("prepare's warm-up launches still reach every kernel of KERNELS (b = 1 at any tile launches the "
                  "one-token kernel, b = 3 at tile 1 the general one), so capture after it compiles and loads nothing "
                  "as before")
BARRIER_SIDE = ("which side of the weights the one barrier falls at rows = SCHEDULERS: the weights read only their "
                "own warp's scores, and the metadata comes after the barrier either way")
BARRIER_TWICE = ("rows is at most MAX_TOKENS, below BLOCK_THREADS, so the barrier before the weights now runs at "
                 "every b: from SCHEDULERS + 1 rows a second barrier beside the one after them, which orders nothing "
                 "the other does not and costs only time")
GENERAL_PATH = ("tile 8 takes write_expert_metadata, the path exact at every tile, instead of write_route_metadata, "
                "its faster form where every picked expert fills one CTA")
IMMEDIATES = ("no immediate the kernel builds is negative, 0xFFFFFFFF or above it (one refused would fail its "
              "import): the range check guards the primitives' other callers")
QUARTERS_ALIKE = ("lanes l and l + 8k hold the same pick, so each quarter writes the same rows with the same values: "
                  "which quarters write changes no value")
PADDING_TWICE = "rows padding + 8 to + 11 below end are in write_padding's range too, which writes the same -1 there"
EMPTY_BODY = "at padding + TOP_K = end write_padding's range is empty"
SHUFFLE_ORDER = ("the 8 shuffles read lanes 0..7 in another order (k ^ 1), and every use of them is a sum or an OR "
                 "over all 8")
NINTH_SHUFFLE = "own[8], a ninth shuffle, is never read: every loop over own stops at TOP_K"
NONZERO_ONLY = "duplicate is only compared with 0"
LANE_8_UNREAD = "bit 8 of the ballot (lane 8, lane 0's pick again) is never read: fresh reads bits 0..7"
OWN_NOT_FRESH = ("an other-token pick equal to local is one this token picked too (local is its own), so fresh is "
                 "false for it and <= counts nothing more")
FLAGS_ONLY = ("tokens holds the flag bits 3 + 4t alone (TOKEN_FLAGS), so the extra mask bit 4 * token is never set in "
              "it")
COMPILE_EXAMPLE = ("an example argument of the compile gives it only its type (a dynamic Int32 parameter: the PTX of "
                   "every variant is the real one's); every launch passes its own value")
KEPT_ARTIFACTS = ("the pinned DSL keeps a PTX with its .entry and a cubin whenever a compile succeeds, so the guard "
                  "raises in neither form; it is there for a DSL that stops keeping them")
SAME_DEVICE_EITHER_WAY = ("current_device only decides whether _launch enters the logits' device first: entering it "
                          "when it is already current launches alike, so a None index changes no launch")
WARM_UPS_COMPILE = ("prepare's warm-up launches (route) compile any variant the swapped loop left out before they launch "
                    "it, so after prepare every kernel route launches is compiled and loaded as before; the swap only "
                    "compiles other variants too")
LISTED = {
    "routing.current_device.statement_dropped.0": SAME_DEVICE_EITHER_WAY,
    "routing.prepare.argument_swap.0": WARM_UPS_COMPILE,
    "routing.compile_artifacts.bool_swap.0": KEPT_ARTIFACTS,
    **{f"routing.compile_variant.int_{step}.{n}": COMPILE_EXAMPLE for step in ("minus_one", "plus_one")
       for n in (4, 6, 7, 8)},
    **{f"routing._top_k.{site}": EXACT_ALWAYS for site in (
        "int_minus_one.0", "int_plus_one.0", "bit_swap.0", "bit_swap.2", "int_minus_one.2", "int_minus_one.5",
        "int_plus_one.5")},
    "routing._top_k.int_plus_one.2": SPURIOUS_TIES,
    "routing.pick_row.sync_earlier.0": WARP_BARRIER_KEPT,
    "routing.pick_row.sync_later.0": WARP_BARRIER_KEPT,
    "routing.Routing.kernel.sync_later.3": PICKS_BARRIER_KEPT,
    "routing.Routing.kernel.sync_earlier.5": ZEROING_BARRIER_KEPT,
    "routing.Routing.kernel.sync_earlier.6": WAIT_KEPT,
    "routing.Routing.kernel.int_minus_one.13": EXPERT_SET_FIRST,
    "routing.Routing.kernel.int_plus_one.13": EXPERT_SET_FIRST,
    "routing._tensors_at.int_minus_one.1": BIAS_BY_ADDRESS,
    "routing._tensors_at.int_plus_one.1": BIAS_BY_ADDRESS,
    "routing.prepare.int_plus_one.1": WARM_UP_COVERS,
    "routing.prepare.int_plus_one.2": WARM_UP_COVERS,
    "routing.Routing.kernel.compare_boundary.8": BARRIER_SIDE,
    "routing.Routing.kernel.constant_neighbour.10": BARRIER_TWICE,
    "routing.Routing.kernel.compare_boundary.9": GENERAL_PATH,
    **{f"primitives.Imm.__post_init__.{site}": IMMEDIATES for site in (
        "int_minus_one.0", "compare_boundary.1", "int_minus_one.1", "int_plus_one.1")},
    **{f"routing.Routing.write_route.{site}": QUARTERS_ALIKE for site in (
        "compare_flip.0", "int_plus_one.0", "compare_flip.2", "int_minus_one.2", "int_plus_one.2")},
    "routing.Routing.write_route.bound_plus_one.0": PADDING_TWICE,
    "routing.Routing.write_route.compare_boundary.1": EMPTY_BODY,
    "routing.Routing.write_one_token_metadata.shuffle_lane.0": SHUFFLE_ORDER,
    "routing.Routing.write_one_token_metadata.compare_boundary.1": IMPLIED_BOUND,
    "routing.Routing.write_two_token_metadata.compare_boundary.2": IMPLIED_BOUND,
    "routing.Routing.write_two_token_metadata.compare_boundary.5": IMPLIED_BOUND,
    "routing.Routing.write_two_token_metadata.shuffle_lane.0": SHUFFLE_ORDER,
    "routing.Routing.write_two_token_metadata.bound_plus_one.1": NINTH_SHUFFLE,
    "routing.Routing.write_two_token_metadata.int_plus_one.2": NONZERO_ONLY,
    "routing.Routing.write_two_token_metadata.compare_boundary.0": LANE_8_UNREAD,
    "routing.Routing.write_two_token_metadata.compare_boundary.6": OWN_NOT_FRESH,
    "routing.Routing.write_route_metadata.int_plus_one.3": FLAGS_ONLY,
    **{f"routing.Routing.write_expert_metadata.int_{step}.{n}": UNROLL for step in ("minus_one", "plus_one")
       for n in (14, 16)},
    **{f"routing.Routing.write_padding.int_{step}.3": UNROLL for step in ("minus_one", "plus_one")},
    "routing.Routing.write_padding.bound_plus_one.0": HEAD_NEVER,
    "routing.Routing.write_padding.int_minus_one.1": HEAD_NEVER,
    "routing.Routing.write_padding.bound_plus_one.2": TAIL_NEVER,
    "routing.Routing.write_padding.int_minus_one.4": TAIL_NEVER,
    "routing.Routing.write_padding.bound_minus_one.1": WHOLE_VECTORS,
    "routing.module.int_plus_one.15": FIFTH_PLANE,
    "routing.Routing.write_expert_metadata.bound_plus_one.0": FIFTH_PLANE,
    "routing.Routing.write_expert_metadata.compare_boundary.2": NO_TOKENS,
    "routing.Routing.write_expert_metadata.int_minus_one.13": NO_TOKENS,
    "routing.Routing.write_expert_metadata.compare_flip.2": WARP_UNIFORM,
    "routing.Routing.write_expert_metadata.int_plus_one.10": WARP_UNIFORM,
    "routing.Routing.write_expert_metadata.compare_flip.4": BLOCK_UNIFORM,
    "routing.Routing.write_expert_metadata.int_plus_one.12": BLOCK_UNIFORM,
    **{f"routing.Routing.write_route_metadata.{site}": ROUTE_UNIFORM
       for site in ("bool_swap.0", "compare_flip.0", "int_plus_one.0", "compare_flip.1", "int_plus_one.1")},
    **{f"routing.Routing.write_two_token_metadata.{site}": TWO_TOKEN_UNIFORM
       for site in ("bool_swap.0", "compare_flip.18", "int_plus_one.20", "compare_flip.19", "int_plus_one.21")},
    "routing.Routing.write_one_token_metadata.compare_flip.6": ONE_TOKEN_UNIFORM,
    "routing.Routing.write_one_token_metadata.int_plus_one.5": ONE_TOKEN_UNIFORM,
    "primitives.compare_exchange_u64.ptx_sibling.0": DISTINCT_WORDS,
    "routing.launch_arguments.int_minus_one.2": ONE_DIMENSION,
    "contract.module.int_plus_one.0": CACHE_SIZE_ONLY,
    "contract.module.int_minus_one.0": CACHE_SIZE_ONLY,
    "routing.cta_table.compare_boundary.0": NO_SUCH_TABLE,
    "contract._check_no_overlap.bound_minus_one.0": WHOLE_WORDS,
    "contract._check_no_overlap.bound_minus_one.1": WHOLE_WORDS,
}
