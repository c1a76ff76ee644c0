"""The evidence for answers: the sentences of the found chunks that bear on a question, what a quote takes in
around one (reach), whether the documents answer at all (floor) and whether a model's claims are backed."""
