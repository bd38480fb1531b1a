"""Layer 4 (models): trans-dimensional random field LMs (Wang, Ou and Tan, "Learning
trans-dimensional random fields with applications to language modeling",
``../shared/papers/wang-ou-tan-trans-dimensional-random-fields.txt``).

p(j, x^j) = pi_j / Z_j(lambda) exp(lambda . f(x^j))  (equation 2), with the features of
Table 2 compiled into a deterministic weighted acceptor (path weight lambda . f(x)),
trained by augmented stochastic approximation with trans-dimensional mixture sampling.

Modules: features (templates and the feature set), acceptor (the feature acceptor and the
exact per-length normalisers by the engine), classes (exchange word clustering).
"""
