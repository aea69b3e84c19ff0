"""Word alignment from attention: subwords grouped into words and links, gold sets and AER, the
policy that reads links from a head, the search for the best policy against gold links (the
leaderboard), the supervised head's labels, reference aligners and symmetrization.

A new reference aligner (beside eflomal) is a class in reference.py added to its ALIGNERS; a new
gold-set format goes in links.py."""
