"""Reading an `Estimate` for people: plots, the HTML report, comparisons."""
