"""Least squares for the research fits (no numpy on the build machine)."""


def solve(rows, b, ridge=0.0):
    """The x minimizing |rows x - b|^2 (+ ridge |x|^2), by the normal equations and Gaussian
    elimination with partial pivoting: for a handful of unknowns."""
    n = len(rows[0])
    a = [[sum(r[i] * r[j] for r in rows) + (ridge if i == j else 0.0) for j in range(n)] for i in range(n)]
    y = [sum(r[i] * v for r, v in zip(rows, b)) for i in range(n)]
    for i in range(n):
        p = max(range(i, n), key=lambda k: abs(a[k][i]))
        a[i], a[p], y[i], y[p] = a[p], a[i], y[p], y[i]
        for k in range(i + 1, n):
            f = a[k][i] / a[i][i]
            a[k] = [x - f * z for x, z in zip(a[k], a[i])]
            y[k] -= f * y[i]
    x = [0.0] * n
    for i in reversed(range(n)):
        x[i] = (y[i] - sum(a[i][j] * x[j] for j in range(i + 1, n))) / a[i][i]
    return x
