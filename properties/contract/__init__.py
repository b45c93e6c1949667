"""route's contract as a property: the contract stated on its own (predicate), a call as data over a byte
arena (calls), the targeted calls at every clause's edge (edges) and the Hypothesis strategies around them
(strategies), one call held to the predicate (check), the checked-call cache's twins (cache), what route
launches after prepare() and from which device (launches), and all of it in one run for the mutant catalog's contract tiers
(sweep)."""
