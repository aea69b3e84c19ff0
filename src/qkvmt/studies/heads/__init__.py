"""Which heads matter: each head masked, and what each looks at (its entropy, its share on `</s>`
and punctuation, whether it is positional) (masking), over a corpus with its pruning curve
(corpus). Its result, HeadsReport, is qkvmt.results.heads, as evaluate's report shows it too."""
