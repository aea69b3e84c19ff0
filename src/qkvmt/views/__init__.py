"""What a user looks at: one sentence's attention as typed maps, one head's Q, K and V, and the
pages and figures that draw them (report.html, the alignment and inspector pages).

A new view of attention, or a new way to draw one, goes here."""
