"""Summary layers over a knowledge base: the tree and its full build (tree), incremental
updates after chunks are added or deleted (update), files and the shared loaded trees
(persist), and what the summary route searches from (search). Import from those modules."""
