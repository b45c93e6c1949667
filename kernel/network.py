"""The sorting network each lane runs over its 8 candidate words; plain Python, so tests need no DSL.

An optimal 8-input network (19 comparators, depth 6). A comparator (i, j) with i < j leaves the larger
word in position i, so the network sorts best first.
"""

SORT8 = (
    (0, 2), (1, 3), (4, 6), (5, 7),
    (0, 4), (1, 5), (2, 6), (3, 7),
    (0, 1), (2, 3), (4, 5), (6, 7),
    (2, 4), (3, 5),
    (1, 4), (3, 6),
    (1, 2), (3, 4), (5, 6),
)

