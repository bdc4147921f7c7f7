"""Exact references for the convex-polygon ops (tests and benchmarks share them).

Corners are computed in float64 and then converted exactly to Fractions, so
the intersection areas below are the exact areas of the float64 polygons: no
rounding, no tolerance to argue about. Written independently of the kernels'
header (plain Python, no torch in the geometry).
"""

import math
from fractions import Fraction
from typing import List, Sequence, Tuple

Point = Tuple[Fraction, Fraction]


def rotated_box_corners(cx: float, cy: float, w: float, h: float, theta: float) -> List[Point]:
    """Corners of (cx, cy, w, h, theta), counter-clockwise for w, h > 0 with
    y up: theta turns the w axis from +x towards +y."""
    c, s = math.cos(theta), math.sin(theta)
    ux, uy = c * w / 2, s * w / 2
    vx, vy = -s * h / 2, c * h / 2
    corners = [(-ux - vx, -uy - vy), (ux - vx, uy - vy), (ux + vx, uy + vy), (-ux + vx, -uy + vy)]
    return [(Fraction(cx) + Fraction(x), Fraction(cy) + Fraction(y)) for x, y in corners]


def quad_points(q: Sequence[float]) -> List[Point]:
    return [(Fraction(float(q[2 * i])), Fraction(float(q[2 * i + 1]))) for i in range(len(q) // 2)]


def _cross(o: Point, a: Point, b: Point) -> Fraction:
    return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])


def signed_area(poly: Sequence[Point]) -> Fraction:
    return sum((_cross(poly[0], poly[i], poly[i + 1]) for i in range(1, len(poly) - 1)), Fraction(0)) / 2


def counter_clockwise(poly: Sequence[Point]) -> List[Point]:
    return list(poly) if signed_area(poly) >= 0 else list(reversed(poly))


def intersection(subject: Sequence[Point], clip: Sequence[Point]) -> List[Point]:
    """The intersection polygon of two counter-clockwise convex polygons."""
    out = list(subject)
    for e in range(len(clip)):
        a, b = clip[e], clip[(e + 1) % len(clip)]
        if not out:
            break
        cur, out = out, []
        for i, p in enumerate(cur):
            q = cur[(i + 1) % len(cur)]
            dp, dq = _cross(a, b, p), _cross(a, b, q)
            if dp >= 0:
                out.append(p)
            if dp * dq < 0:
                t = dp / (dp - dq)
                out.append((p[0] + t * (q[0] - p[0]), p[1] + t * (q[1] - p[1])))
    return out if len(out) >= 3 else []


def intersection_area(a: Sequence[Point], b: Sequence[Point]) -> Fraction:
    a, b = counter_clockwise(a), counter_clockwise(b)
    if signed_area(a) <= 0 or signed_area(b) <= 0:
        return Fraction(0)
    poly = intersection(a, b)
    return max(signed_area(poly), Fraction(0)) if poly else Fraction(0)


def polygon_overlap(a: Sequence[Point], b: Sequence[Point], iof: bool = False) -> float:
    """IoU (or intersection over a's area) of two convex polygons; 0 when the
    base area is 0."""
    area_a, area_b = abs(signed_area(a)), abs(signed_area(b))
    inter = intersection_area(a, b)
    base = area_a if iof else area_a + area_b - inter
    return float(inter / base) if base > 0 else 0.0


def rotated_overlap(a: Sequence[float], b: Sequence[float], iof: bool = False) -> float:
    """Overlap of two (cx, cy, w, h, theta) boxes, theta counter-clockwise
    with y up. Non-finite parameters or w, h <= 0: 0."""
    values = [float(v) for v in list(a) + list(b)]
    if not all(math.isfinite(v) for v in values) or min(values[2], values[3], values[7], values[8]) <= 0:
        return 0.0
    return polygon_overlap(rotated_box_corners(*values[:5]), rotated_box_corners(*values[5:]), iof)


def quadri_overlap(a: Sequence[float], b: Sequence[float], iof: bool = False) -> float:
    """Overlap of two convex quadrilaterals (x1, y1, ..., x4, y4)."""
    values = [float(v) for v in list(a) + list(b)]
    if not all(math.isfinite(v) for v in values):
        return 0.0
    return polygon_overlap(quad_points(a), quad_points(b), iof)


def convex_hull(points: Sequence[Point]) -> List[Point]:
    """The convex hull (counter-clockwise, no collinear vertices) by brute force: a -> b is
    an edge when every other point is strictly left of it or on the segment."""
    if len(set(points)) < 3:
        return sorted(set(points))
    # on integers (the points times a common denominator): the same decisions, much faster
    scale = math.lcm(*(c.denominator for p in points for c in p))
    back = {(int(p[0] * scale), int(p[1] * scale)): p for p in points}
    pts = sorted(back)
    nxt = {}
    for a in pts:
        for b in pts:
            if a == b:
                continue
            ok = True
            for p in pts:
                c = _cross(a, b, p)
                inside_segment = min(a[0], b[0]) <= p[0] <= max(a[0], b[0]) and min(a[1], b[1]) <= p[1] <= max(
                    a[1], b[1]
                )
                if c < 0 or (c == 0 and not inside_segment):
                    ok = False
                    break
            if ok:
                nxt[a] = b
                break  # a's only successor
    start = pts[0]
    hull, cur = [start], nxt[start]
    while cur != start and len(hull) <= len(pts):
        hull.append(cur)
        cur = nxt[cur]
    return [back[p] for p in hull]


def pointset_iou(pointset: Sequence[float], quad: Sequence[float]) -> float:
    """convex_iou's IoU of the hull of a point set (x1, y1, ...) and a convex polygon."""
    hull = convex_hull(quad_points(pointset))
    if len(hull) < 3 or any(not math.isfinite(float(v)) for v in list(pointset) + list(quad)):
        return 0.0
    return polygon_overlap(hull, quad_points(quad))


def pointset_giou(pointset: Sequence[float], quad: Sequence[float]) -> float:
    """convex_giou's GIoU of the hull of a point set and a convex polygon."""
    hull, q = convex_hull(quad_points(pointset)), quad_points(quad)
    a = abs(signed_area(hull)) if len(hull) >= 3 else Fraction(0)
    b = abs(signed_area(q))
    inter = intersection_area(hull, q) if len(hull) >= 3 else Fraction(0)
    union = a + b - inter
    enclosing = convex_hull(hull + q)
    c = abs(signed_area(enclosing)) if len(enclosing) >= 3 else Fraction(0)
    iou = inter / union if union > 0 else Fraction(0)
    return float(iou - (c - union) / c) if c > 0 else float(iou)
