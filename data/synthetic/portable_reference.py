"""An independent Python re-implementation of the synthetic generators' randomness (mt19937_64,
splitmix64 seeds, rejection sampling, the power-law gap sampler) and of MQAR and copying.

synthetic_portable_test runs it and requires the C++ output to be identical: the data is a
function of the documented algorithm alone (exact integer arithmetic and IEEE doubles), not of a
standard library's distributions, so it is the same on every platform.

usage: portable_reference.py mqar V T K N POWER_A RANDOM_FILL SEED FIRST
       portable_reference.py copying V L N SEED FIRST
prints {"tokens": [[...]], "targets": [[...]]} as JSON.
"""
import json
import sys

M64 = (1 << 64) - 1


class MT19937_64:
    """The C++ standard's std::mt19937_64 ([rand.eng.mers], [rand.predef])."""

    def __init__(self, seed):
        self.mt = [seed & M64]
        for i in range(1, 312):
            prev = self.mt[-1]
            self.mt.append((6364136223846793005 * (prev ^ (prev >> 62)) + i) & M64)
        self.i = 312

    def next(self):
        if self.i >= 312:
            mt = self.mt
            for k in range(312):
                x = (mt[k] & 0xFFFFFFFF80000000) | (mt[(k + 1) % 312] & 0x7FFFFFFF)
                xa = x >> 1
                if x & 1:
                    xa ^= 0xB5026F5AA96619E9
                mt[k] = mt[(k + 156) % 312] ^ xa
            self.i = 0
        y = self.mt[self.i]
        self.i += 1
        y ^= (y >> 29) & 0x5555555555555555
        y ^= (y << 17) & 0x71D67FFFEDA60000
        y ^= (y << 37) & 0xFFF7EEE000000000
        y ^= y >> 43
        return y & M64


def splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def derive_seed(seed, parts):
    h = splitmix64(seed)
    for p in parts:
        h = splitmix64(h ^ splitmix64((p + 0x632BE59BD9B4E019) & M64))
    return h


class Rng:
    def __init__(self, seed):
        self.e = MT19937_64(seed)

    def below(self, n):
        t = (2**64 - n) % n
        while True:
            x = self.e.next()
            if x >= t:
                return x % n

    def uniform(self):
        return (self.e.next() >> 11) * 2.0**-53

    def sample_distinct(self, n, k):
        if k * 4 >= n:
            pool = list(range(n))
            out = []
            for i in range(k):
                j = i + self.below(n - i)
                pool[i], pool[j] = pool[j], pool[i]
                out.append(pool[i])
            return out
        out, seen = [], set()
        while len(out) < k:
            x = self.below(n)
            if x not in seen:
                seen.add(x)
                out.append(x)
        return out


def draw_gaps(rng, space, power_a, k):
    leaves = 1
    while leaves < space:
        leaves *= 2
    tree = [0.0] * (2 * leaves)
    for g in range(space):
        tree[leaves + g] = float(g + 1) ** (power_a - 1.0)
    for i in range(leaves - 1, 0, -1):
        tree[i] = tree[2 * i] + tree[2 * i + 1]
    out = []
    while len(out) < k:
        u = rng.uniform() * tree[1]
        node = 1
        while node < leaves:
            if u < tree[2 * node]:
                node = 2 * node
            else:
                u -= tree[2 * node]
                node = 2 * node + 1
        if node - leaves >= space or tree[node] == 0.0:
            continue
        out.append(node - leaves)
        tree[node] = 0.0
        i = node // 2
        while i >= 1:
            tree[i] = tree[2 * i] + tree[2 * i + 1]
            i //= 2
    return out


def mqar(V, T, k, n, power_a, random_fill, seed, first):
    tokens, targets = [], []
    half = V // 2
    for e in range(n):
        rng = Rng(derive_seed(seed, [first + e]))
        x, y = [0] * T, [-100] * T
        keys = rng.sample_distinct(half - 1, k)
        values = rng.sample_distinct(V - half, k)
        gaps = draw_gaps(rng, (T - 2 * k) // 2, power_a, k)
        for j in range(k):
            x[2 * j], x[2 * j + 1] = 1 + keys[j], half + values[j]
            q = 2 * k + 2 * gaps[j]
            x[q], y[q] = 1 + keys[j], half + values[j]
        if random_fill:
            for t in range(T):
                if x[t] == 0:
                    x[t] = rng.below(V)
        tokens.append(x)
        targets.append(y)
    return tokens, targets


def copying(V, L, n, seed, first):
    tokens, targets = [], []
    for e in range(n):
        rng = Rng(derive_seed(seed, [first + e]))
        s = [rng.below(V - 1) for _ in range(L)]
        tokens.append(s + [V - 1] + s[:-1])
        targets.append([-100] * L + s)
    return tokens, targets


def main():
    a = sys.argv[1:]
    if a[0] == "selfcheck":  # the standard's check value for the engine
        e = MT19937_64(5489)
        for _ in range(9999):
            e.next()
        assert e.next() == 9981545732273789042
        print("{}")
        return
    if a[0] == "mqar":
        tok, tgt = mqar(int(a[1]), int(a[2]), int(a[3]), int(a[4]), float(a[5]), a[6] == "1",
                        int(a[7]), int(a[8]))
    elif a[0] == "copying":
        tok, tgt = copying(int(a[1]), int(a[2]), int(a[3]), int(a[4]), int(a[5]))
    else:
        raise SystemExit(f"unknown generator {a[0]!r}")
    print(json.dumps({"tokens": tok, "targets": tgt}))


if __name__ == "__main__":
    main()
