"""route's contract as a property: an independent statement of it (predicate), calls at the edges of every
clause (strategies, edges), one call checked against it (check), and the checked-call cache's twins (cache)."""
