#!/usr/bin/env python3
"""EMO Order 3: K-clock fit of the clock model to the Perseus SOSP'24 stage profiles, scored at
every held-out clock. Pure Python 3, no dependencies.

    python3 order3.py              # the table (K = 2, 3, 4; proposed procedure and today's "self")
    python3 order3.py --sensitivity  # P_static and classification-threshold sensitivity at K = 3
    python3 order3.py --noise        # adjacent-clock noise floor of each file

Proposed procedure ("pinned-static, ceiling/limit"), per file, from the K fit clocks only, plus two
device numbers that are in devices/*.json and do not come from any sweep of these workloads:
    P_static  = idle_power_w  (Perseus' measured P2P blocking power: A100 83.64 W, A40 70.38 W)
    P_limit   = power_limit_w (A100-SXM 500 W [assumption in the device file], A40 300 W)

 1. Time, per unit (unchanged from fit.cc FitTime): t = t_mem + t_comp * f_max / min(f, f_ct);
    f_ct searched on a 1 MHz grid [second-lowest fit clock, highest fit clock) plus "no cap", kept
    only if it halves the rms relative residual; relative least squares, t_mem, t_comp >= 0.
 2. Classify the file: P_top,u = E/t of unit u at the highest fit clock. The file is
    POWER-LIMITED if median_u P_top,u >= 0.97 * P_limit, else CLOCK-CEILING.
 3. Power model, V(f) = 1 + k * max(0, f - f_r), g = (frequency factor) * V(voltage clock)^2:
      CLOCK-CEILING unit: P(f) = P_static + c_u * min(f, f_ct) * V(f)^2
          (the clock stops at f_ct, the voltage keeps following the locked clock f)
          observations: every fit clock, frequency factor min(f, f_ct), voltage clock f.
      POWER-LIMITED unit: P(f) = min(P_top,u, P_static + c_u * f * V(f)^2)
          observations: every fit clock below the top one, factor f, voltage clock f; the top
          clock is not an observation (it measures the limit, not the curve); if the unit has a
          time cap f_ct above its highest such clock, one pseudo-observation P(f_ct) = P_top,u
          (a hard limiter holds the power where the clock stops).
 4. Power fit (fit.cc FitPower with P_static fixed): relative least squares over all observations
    of all units; c_u closed form per unit for a given (f_r, k); (f_r, k) by grid search: flat
    curve first, then f_r on a 5 MHz grid [lowest, highest observation clock), k on 120 steps of
    (1/range) (V rise <= 1 over the observed range), then 40 golden-section steps on k at the best
    f_r. Strict '<' comparisons (first best kept).
 5. Predict: t as in 1; E = P * t.
"""
import csv
import os
import math
import statistics
import sys

INF = float('inf')
DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..', 'shared', 'data', 'perseus_sosp24', 'stage_profile') + '/'
FILES = ['gpt3-175b+a100_sxm_bf16', 'bloom+a100_sxm_bf16', 'gpt3-175b+a40_bf16', 'bloom+a40_bf16']
# Device numbers (devices/a100-sxm.json, devices/a40.json in /work/main): idle_power_w (= Perseus
# P2P blocking power) and power_limit_w.
DEVICE = {
    'a100': dict(idle_power_w=83.64, power_limit_w=500.0),
    'a40': dict(idle_power_w=70.38, power_limit_w=300.0),
}
TARGET = {'a100': 1.5, 'a40': 3.0}


def gpu_of(name):
    return 'a100' if 'a100' in name else 'a40'


def load(name):
    units, clocks = {}, set()
    with open(DATA + name + '.csv') as fh:
        for r in csv.DictReader(fh):
            u = '%s/%s' % (r['stage'], r['instruction'])
            f = float(r['frequency'])
            units.setdefault(u, {})[f] = (float(r['time']), float(r['energy']))
            clocks.add(f)
    return list(units), units, sorted(clocks)


def spread_clocks(clocks, k):
    n = len(clocks)
    return [clocks[int(math.floor(i * (n - 1) / (k - 1) + 0.5))] for i in range(k)]


# ------------------------------------------------------------------ time (fit.cc FitTime)
def fit_time_linear(ts, xs):
    """Relative LSQ t ~ a + b x, a, b >= 0 -> (a, b, sse)."""
    s00 = s01 = s11 = r0 = r1 = 0.0
    for t, x in zip(ts, xs):
        w = 1.0 / t
        s00 += w * w
        s01 += w * w * x
        s11 += w * w * x * x
        r0 += w
        r1 += w * x

    def sse(a, b):
        return sum((a / t + b * x / t - 1.0) ** 2 for t, x in zip(ts, xs))
    det = s00 * s11 - s01 * s01
    if det > 1e-18 * s00 * s11:
        a = (r0 * s11 - r1 * s01) / det
        b = (s00 * r1 - s01 * r0) / det
        if a >= 0 and b >= 0:
            return a, b, sse(a, b)
    b1 = max(0.0, r1 / s11)
    a1 = max(0.0, r0 / s00)
    fb, fa = (0.0, b1, sse(0.0, b1)), (a1, 0.0, sse(a1, 0.0))
    return fb if fb[2] <= fa[2] else fa


def time_candidates(samples, f_max, step=1.0):
    """samples [(f, t)] -> [(cap, (a, b, sse))], entry 0 = no cap."""
    def at(cap):
        return fit_time_linear([t for _, t in samples], [f_max / min(f, cap) for f, _ in samples])
    out = [(INF, at(INF))]
    distinct = sorted(set(f for f, _ in samples))
    if len(distinct) >= 3:
        cap = distinct[1]
        while cap < distinct[-1]:
            out.append((cap, at(cap)))
            cap += step
    return out


def fit_time(samples, f_max, cap_min_gain=0.5):
    c = time_candidates(samples, f_max)
    best = 0
    for i in range(1, len(c)):
        if c[i][1][2] < c[best][1][2]:
            best = i
    if best and not math.sqrt(c[best][1][2]) <= (1 - cap_min_gain) * math.sqrt(c[0][1][2]):
        best = 0
    cap, (a, b, _) = c[best]
    return a, b, cap


# ------------------------------------------------------------------ power
def volt(f, ridge, slope):
    return 1.0 + slope * max(0.0, f - ridge)


def power_lsq(obs, nu, ridge, slope, p_static, weight='rel'):
    """obs [(u, f_freq, f_volt, P)]; P = p_static + c_u * f_freq * V(f_volt)^2.
    Returns (c list, sse). Relative residuals (weight 1/P^2), or 'log' (same at first order)."""
    sgg = [0.0] * nu
    sgp = [0.0] * nu
    gs = []
    for u, ff, fv, p in obs:
        v = volt(fv, ridge, slope)
        g = ff * v * v
        gs.append(g)
        w = 1.0 / (p * p)
        sgg[u] += w * g * g
        sgp[u] += w * g * (p - p_static)
    c = [max(0.0, sgp[u] / sgg[u]) if sgg[u] > 0 else 0.0 for u in range(nu)]
    sse = 0.0
    for (u, ff, fv, p), g in zip(obs, gs):
        m = p_static + c[u] * g
        r = math.log(m / p) if weight == 'log' else m / p - 1.0
        sse += r * r
    return c, sse


def fit_power(obs, nu, p_static, ridge_step=5.0, slope_steps=120, max_rise=1.0, golden=40,
              weight='rel'):
    f_lo = min(min(o[1], o[2]) for o in obs)
    f_hi = max(max(o[1], o[2]) for o in obs)
    rng = max(1.0, f_hi - f_lo)
    kmax = max_rise / rng
    best = [INF, None, None, None]

    def consider(r, k):
        c, sse = power_lsq(obs, nu, r, k, p_static, weight)
        if sse < best[0]:
            best[:] = [sse, r, k, c]
        return sse
    consider(f_hi, 0.0)  # flat voltage
    r = f_lo
    while r < f_hi:
        for s in range(1, slope_steps + 1):
            consider(r, kmax * s / slope_steps)
        r += ridge_step
    if golden and best[2] > 0:
        r0, step = best[1], kmax / slope_steps
        a, b = max(0.0, best[2] - step), best[2] + step
        phi = 0.5 * (math.sqrt(5) - 1)
        for _ in range(golden):
            m1, m2 = b - phi * (b - a), a + phi * (b - a)
            if power_lsq(obs, nu, r0, m1, p_static, weight)[1] < power_lsq(obs, nu, r0, m2, p_static, weight)[1]:
                b = m2
            else:
                a = m1
        consider(r0, 0.5 * (a + b))
    return dict(sse=best[0], ridge=best[1], slope=best[2], activity=best[3])


# ------------------------------------------------------------------ the proposed procedure
def fit_proposed(names, data, clocks, fit_clocks, gpu, limit_frac=0.97, p_static=None,
                 classify=None, weight='rel'):
    dev = DEVICE[gpu]
    ps = dev['idle_power_w'] if p_static is None else p_static
    f_max = clocks[-1]
    f_top = fit_clocks[-1]
    use = set(fit_clocks)
    units = []
    for u in names:
        s = [(f, data[u][f][0], data[u][f][1]) for f in sorted(data[u]) if f in use]
        a, b, cap = fit_time([(f, t) for f, t, _ in s], f_max)
        units.append(dict(samples=s, t_mem=a, t_comp=b, f_ct=cap, p_top=s[-1][2] / s[-1][1]))
    med_top = statistics.median(m['p_top'] for m in units)
    limited = med_top >= limit_frac * dev['power_limit_w'] if classify is None else classify == 'limited'
    obs = []
    for ui, m in enumerate(units):
        if limited:
            below = [(f, t, e) for f, t, e in m['samples'] if f < f_top]
            for f, t, e in below:
                obs.append((ui, f, f, e / t))
            if m['f_ct'] < INF and m['f_ct'] > max(f for f, _, _ in below):
                obs.append((ui, m['f_ct'], m['f_ct'], m['p_top']))
            m['f_freq_cap'], m['clip'] = INF, m['p_top']
        else:
            for f, t, e in m['samples']:
                obs.append((ui, min(f, m['f_ct']), f, e / t))
            m['f_freq_cap'], m['clip'] = m['f_ct'], INF
    pw = fit_power(obs, len(units), ps, weight=weight)
    for ui, m in enumerate(units):
        m['c'] = pw['activity'][ui]

    def predict(ui, f):
        m = units[ui]
        t = m['t_mem'] + m['t_comp'] * f_max / min(f, m['f_ct'])
        v = volt(f, pw['ridge'], pw['slope'])
        p = min(m['clip'], ps + m['c'] * min(f, m['f_freq_cap']) * v * v)
        return t, p
    return dict(predict=predict, p_static=ps, ridge=pw['ridge'], slope=pw['slope'],
                limited=limited, median_p_top=med_top, units=units)


# ------------------------------------------------------------------ today's "self" (fit.cc)
def fit_self(names, data, clocks, fit_clocks, gpu):
    """Re-implementation of FitProfile (self protocol): P_static free in [0, min P], joint caps."""
    f_max = clocks[-1]
    use = set(fit_clocks)
    nu = len(names)
    S, C, choice = [], [], []
    for u in names:
        s = [(f, data[u][f][0], data[u][f][1]) for f in sorted(data[u]) if f in use]
        c = time_candidates([(f, t) for f, t, _ in s], f_max)
        best = 0
        for i in range(1, len(c)):
            if c[i][1][2] < c[best][1][2]:
                best = i
        if best and not math.sqrt(c[best][1][2]) <= 0.5 * math.sqrt(c[0][1][2]):
            best = 0
        S.append(s)
        C.append(c)
        choice.append(best)

    def gfac(f, r, k):
        v = volt(f, r, k)
        return f * v * v

    def fit_pw():
        obs = [(ui, min(f, C[ui][choice[ui]][0]), e / t) for ui in range(nu) for f, t, e in S[ui]]
        pmin = min(o[2] for o in obs)
        f_lo, f_hi = min(o[1] for o in obs), max(o[1] for o in obs)
        kmax = 1.0 / max(1.0, f_hi - f_lo)

        def lin(r, k):
            sgg = [0.0] * nu
            sgp = [0.0] * nu
            sg1 = [0.0] * nu
            s11 = s1p = 0.0
            gs = []
            for u, f, p in obs:
                g = gfac(f, r, k)
                gs.append(g)
                w = 1 / (p * p)
                sgg[u] += w * g * g
                sgp[u] += w * g * p
                sg1[u] += w * g
                s11 += w
                s1p += w * p
            qa, qb = s11, -s1p
            for u in range(nu):
                if sgg[u] > 0:
                    qa -= sg1[u] ** 2 / sgg[u]
                    qb += sgp[u] * sg1[u] / sgg[u]
            p0 = min(max(-qb / qa if qa > 1e-300 else 0.0, 0.0), pmin)
            c = [max(0.0, (sgp[u] - p0 * sg1[u]) / sgg[u]) if sgg[u] > 0 else 0.0 for u in range(nu)]
            sse = sum(((p0 + c[u] * g) / p - 1) ** 2 for (u, f, p), g in zip(obs, gs))
            return p0, c, sse
        best = [INF]

        def consider(r, k):
            p0, c, sse = lin(r, k)
            if sse < best[0]:
                best[:] = [sse, p0, c, r, k]
        consider(f_hi, 0.0)
        r = f_lo
        while r < f_hi:
            for s in range(1, 121):
                consider(r, kmax * s / 120)
            r += 5.0
        r0, step = best[3], kmax / 120
        a, b = max(0.0, best[4] - step), best[4] + step
        phi = 0.5 * (math.sqrt(5) - 1)
        for _ in range(40):
            m1, m2 = b - phi * (b - a), a + phi * (b - a)
            if lin(r0, m1)[2] < lin(r0, m2)[2]:
                b = m2
            else:
                a = m1
        consider(r0, 0.5 * (a + b))
        return dict(p_static=best[1], activity=best[2], ridge=best[3], slope=best[4])

    def unit_res(ui, cap, dev):
        sgg = sgp = 0.0
        gp = []
        for f, t, e in S[ui]:
            p = e / t
            g = gfac(min(f, cap), dev['ridge'], dev['slope'])
            gp.append((g, p))
            sgg += g * g / (p * p)
            sgp += g * (p - dev['p_static']) / (p * p)
        c = max(0.0, sgp / sgg) if sgg > 0 else 0.0
        return sum(((dev['p_static'] + c * g) / p - 1) ** 2 for g, p in gp)

    dev = fit_pw()
    for _ in range(6):
        changed = False
        for ui in range(nu):
            best, bc = choice[ui], INF
            for i, (cap, tf) in enumerate(C[ui]):
                cost = tf[2] + unit_res(ui, cap, dev)
                if cost < bc:
                    bc, best = cost, i
            changed |= best != choice[ui]
            choice[ui] = best
        dev = fit_pw()
        if not changed:
            break

    def predict(ui, f):
        cap, (a, b, _) = C[ui][choice[ui]]
        fe = min(f, cap)
        return a + b * f_max / fe, dev['p_static'] + dev['activity'][ui] * gfac(fe, dev['ridge'], dev['slope'])
    return dict(predict=predict, p_static=dev['p_static'], ridge=dev['ridge'], slope=dev['slope'])


# ------------------------------------------------------------------ scoring
def score(names, data, fit, fit_clocks):
    use = set(fit_clocks)
    et, ee = [], []
    for ui, u in enumerate(names):
        for f in sorted(data[u]):
            if f in use:
                continue
            t, e = data[u][f]
            tp, pp = fit['predict'](ui, f)
            et.append(100 * (tp - t) / t)
            ee.append(100 * (pp * tp - e) / e)
    n = len(et)
    return dict(points=n, time_mape=sum(map(abs, et)) / n, energy_mape=sum(map(abs, ee)) / n,
                time_max=max(map(abs, et)), energy_max=max(map(abs, ee)))


def validate(name, k, method='proposed', **kw):
    names, data, clocks = load(name)
    fc = spread_clocks(clocks, k)
    g = gpu_of(name)
    fit = fit_proposed(names, data, clocks, fc, g, **kw) if method == 'proposed' else fit_self(names, data, clocks, fc, g)
    return fc, fit, score(names, data, fit, fc)


def noise_floor():
    print('| file | time sigma % | energy sigma % | power sigma % | energy MAPE floor % (0.8 sigma) |')
    print('|---|---|---|---|---|')
    for name in FILES:
        names, data, clocks = load(name)
        res = {}
        for q in ('time', 'energy', 'power'):
            devs = []
            for u in names:
                fs = sorted(data[u])

                def val(f):
                    t, e = data[u][f]
                    return {'time': t, 'energy': e, 'power': e / t}[q]
                for i in range(1, len(fs) - 1):
                    m = 0.5 * (val(fs[i - 1]) + val(fs[i + 1]))
                    devs.append((val(fs[i]) - m) / m)
            res[q] = 100 * math.sqrt(sum(d * d for d in devs) / len(devs)) / math.sqrt(1.5)
        print('| %s | %.2f | %.2f | %.2f | %.2f |' % (name, res['time'], res['energy'], res['power'], 0.8 * res['energy']))


def main():
    if '--noise' in sys.argv:
        noise_floor()
        return
    if '--sensitivity' in sys.argv:
        print('K = 3 energy MAPE % of the proposed procedure when one input is changed')
        print('| change | ' + ' | '.join(FILES) + ' |')
        print('|---|' + '---|' * len(FILES))
        rows = [('as proposed', {})]
        rows += [('P_static = %g W' % p, dict(p_static=p)) for p in (40, 60, 100)]
        rows += [('class forced: clock-ceiling', dict(classify='ceiling')),
                 ('class forced: power-limited', dict(classify='limited')),
                 ('objective: log error', dict(weight='log'))]
        for label, kw in rows:
            cells = []
            for name in FILES:
                _, fit, s = validate(name, 3, **kw)
                cells.append('%.2f' % s['energy_mape'])
            print('| %s | %s |' % (label, ' | '.join(cells)), flush=True)
        return
    print('| profile | K | fit clocks (MHz) | class | f_r MHz | k 1/MHz | time MAPE | energy MAPE | '
          'max err (time/energy) | target | today self: time / energy |')
    print('|---|---|---|---|---|---|---|---|---|---|---|')
    for k in (2, 3, 4):
        for name in FILES:
            fc, fit, s = validate(name, k)
            _, _, b = validate(name, k, method='self')
            g = gpu_of(name)
            tgt = ''
            if k == 3:
                ok = s['energy_mape'] <= TARGET[g] and s['time_mape'] <= TARGET[g]
                tgt = '%.1f%% %s' % (TARGET[g], 'met' if ok else 'MISSED')
            print('| %s | %d | %s | %s | %.0f | %.2e | %.2f%% | %.2f%% | %.2f%% / %.2f%% | %s | %.2f%% / %.2f%% |' % (
                name.replace('_bf16', ''), k, ', '.join('%d' % f for f in fc),
                'power-limited' if fit['limited'] else 'clock-ceiling', fit['ridge'], fit['slope'],
                s['time_mape'], s['energy_mape'], s['time_max'], s['energy_max'], tgt,
                b['time_mape'], b['energy_mape']), flush=True)


if __name__ == '__main__':
    main()
