/**
 * WCAG 2.x contrast arithmetic for the e2e's colour checks: parse CSS `rgb()/rgba()` strings as
 * computed by the browser, composite translucent layers over what lies below, and the contrast
 * ratio of two colours. Formulas: WCAG 2.2, "relative luminance" and "contrast ratio"
 * (https://www.w3.org/TR/WCAG22/#dfn-relative-luminance); AA needs ≥ 4.5 for normal text.
 */

/** sRGB 0–255 channels and alpha 0–1. */
export interface Rgba {
  r: number;
  g: number;
  b: number;
  a: number;
}

/** Parses `rgb(r, g, b)` / `rgba(r, g, b, a)` (also the space syntax `rgb(r g b / a)`). @throws Error quoting the text. */
export function parseCssColor(text: string): Rgba {
  const m = /^rgba?\(\s*([\d.]+)[ ,]+([\d.]+)[ ,]+([\d.]+)(?:\s*[,/]\s*([\d.]+%?))?\s*\)$/.exec(text.trim());
  if (!m) throw new Error(`not an rgb()/rgba() colour: "${text}"`);
  const alpha = m[4] === undefined ? 1 : m[4].endsWith('%') ? Number(m[4].slice(0, -1)) / 100 : Number(m[4]);
  return { r: Number(m[1]), g: Number(m[2]), b: Number(m[3]), a: alpha };
}

/** `top` painted over the opaque `below` (source-over). */
export function composite(top: Rgba, below: Rgba): Rgba {
  const a = top.a;
  return { r: top.r * a + below.r * (1 - a), g: top.g * a + below.g * (1 - a), b: top.b * a + below.b * (1 - a), a: 1 };
}

/** Relative luminance 0–1 of an opaque colour. */
export function luminance({ r, g, b }: Rgba): number {
  const lin = (c: number) => {
    const s = c / 255;
    return s <= 0.04045 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4;
  };
  return 0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b);
}

/** Contrast ratio 1–21 of two opaque colours. */
export function contrastRatio(a: Rgba, b: Rgba): number {
  const [hi, lo] = [luminance(a), luminance(b)].sort((x, y) => y - x);
  return (hi + 0.05) / (lo + 0.05);
}

/**
 * The contrast of text over a stack of backgrounds (innermost first, as the page walks up from
 * the element; the last one is taken as opaque, white if it is transparent).
 */
export function textContrast(color: string, backgrounds: readonly string[]): number {
  let below: Rgba = { r: 255, g: 255, b: 255, a: 1 };
  const layers = backgrounds.map(parseCssColor);
  for (let i = layers.length - 1; i >= 0; i--) below = composite(layers[i], below);
  return contrastRatio(composite(parseCssColor(color), below), below);
}
