"""`logicroute adapt`: a specialist router for one KB from questions written from its chunks; `bench adapt`;
`bench specialist`."""
