"""Word alignment from attention: subwords grouped into words and links, gold sets and AER, the
policy that reads links from a head, the search for the best policy against gold links (the
leaderboard), the supervised head's labels, reference aligners, symmetrization, and the links of
a whole corpus in batched passes (corpus).

A new reference aligner (beside eflomal) is a class in reference.py added to its ALIGNERS; a new
gold-set format goes in links.py."""
