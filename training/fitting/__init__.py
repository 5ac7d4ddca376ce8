"""Training and judging the router: the fit, train recipes, eval-router, calibrate, leave-one-dataset-out."""
