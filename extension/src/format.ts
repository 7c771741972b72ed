/** Short text forms shared by node labels, edge labels and the side panel. */

const DTYPE_SHORT: Record<string, string> = {
  float16: 'f16',
  bfloat16: 'bf16',
  float32: 'f32',
  float64: 'f64',
  int8: 'i8',
  int32: 'i32',
  int64: 'i64',
  uint8: 'u8'
};

export function shortDtype(dtype: string): string {
  return DTYPE_SHORT[dtype] ?? dtype;
}

/** `[16, 4096]` → `16×4096` (a scalar tensor shows as `scalar`). */
export function fmtDims(dims: readonly number[]): string {
  return dims.length ? dims.join('×') : 'scalar';
}

export function fmtTensor(t: { dims: readonly number[]; dtype: string }): string {
  return `${fmtDims(t.dims)} ${shortDtype(t.dtype)}`;
}

const AXES = ['x', 'y', 'z'];

/**
 * A grid map (`input_map`/`output_map`) `[x, y, z]` → data dim, -1 = replicated:
 * `[1, -1, -1]` → `{x→1}`, all -1 → `{}` (every block sees the whole tensor).
 */
export function fmtMap(map: unknown): string {
  if (!Array.isArray(map)) {
    return String(map);
  }
  const parts = map.flatMap((d, a) => (typeof d === 'number' && d >= 0 ? [`${AXES[a] ?? a}→${d}`] : []));
  return `{${parts.join(', ')}}`;
}

/** A for-loop dim (fmap): -1 means the same tile every iteration. */
export function fmtFmap(dim: unknown): string {
  return typeof dim === 'number' && dim >= 0 ? String(dim) : '∅';
}

export function fmtValue(v: unknown): string {
  if (v === null || v === undefined) {
    return 'null';
  }
  if (typeof v === 'string') {
    return v;
  }
  if (typeof v === 'number') {
    return fmtNumber(v);
  }
  return JSON.stringify(v);
}

/** Numbers for legends and panels: at most 4 significant digits, no exponent for common ranges. */
export function fmtNumber(v: number): string {
  if (!Number.isFinite(v)) {
    return String(v);
  }
  if (Number.isInteger(v) && Math.abs(v) < 1e15) {
    return String(v);
  }
  const a = Math.abs(v);
  if (a !== 0 && (a >= 1e15 || a < 1e-3)) {
    return v.toExponential(2);
  }
  return String(Number(v.toPrecision(4)));
}
