/** The two seed μGraphs as mirage_lab writes them (regenerated and checked by tests/browser/test_extension_fixtures.py). */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseMuGraph, type MuGraphJSON } from '../src/mugraph';

export function raw(name: string): any {
  return JSON.parse(readFileSync(join(__dirname, 'fixtures', `${name}.json`), 'utf8'));
}

export const rmsRaw = () => raw('rms_norm_linear_fused');
export const gqaRaw = () => raw('gqa_flashdecoding');
export const rms = (): MuGraphJSON => parseMuGraph(rmsRaw());
export const gqa = (): MuGraphJSON => parseMuGraph(gqaRaw());
