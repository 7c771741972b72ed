import { describe, expect, it } from 'vitest';
import { MuGraphError, parseMuGraph } from '../src/mugraph';
import { gqaRaw, rmsRaw } from './fixtures';

describe('parseMuGraph', () => {
  it('accepts the seed graphs, as objects and as JSON text', () => {
    const g = parseMuGraph(rmsRaw());
    expect(g.kernel_graph.ops.map(o => o.type)).toEqual(['input', 'input', 'customized']);
    expect(g.kernel_graph.ops[2].block_graph!.thread_graph!.chains).toEqual([[0], [1], [2], [3, 4], [5], [6]]);
    const fromText = parseMuGraph(JSON.stringify(gqaRaw()));
    expect(fromText.kernel_graph.ops.filter(o => o.type === 'customized')).toHaveLength(2);
  });

  const bad: [string, (d: any) => unknown, RegExp][] = [
    ['not an object', () => 42, /expected a JSON object/],
    ['bad JSON text', () => '{"format":', /not valid JSON/],
    ['wrong format tag', d => ({ ...d, format: 'other' }), /^format: expected "mirage_lab.mugraph"/],
    ['newer version', d => ({ ...d, version: 2 }), /version: this viewer reads versions up to 1/],
    ['missing kernel graph', d => ({ ...d, kernel_graph: undefined }), /^kernel_graph: expected an object, got nothing/],
    [
      'dangling tensor id',
      d => {
        d.kernel_graph.ops[2].inputs[1] = 99;
        return d;
      },
      /kernel_graph\.ops\[2\]\.inputs\[1\]: tensor 99 is not in the kernel graph's tensors/
    ],
    [
      'non-integer dims',
      d => {
        d.kernel_graph.tensors[0].dims = [16, 'x'];
        return d;
      },
      /kernel_graph\.tensors\[0\]\.dims\[1\]: expected an integer, got "x"/
    ],
    [
      'customized op without block graph',
      d => {
        delete d.kernel_graph.ops[2].block_graph;
        return d;
      },
      /kernel_graph\.ops\[2\]\.block_graph: a customized op needs a block_graph object/
    ],
    [
      'loader count mismatch',
      d => {
        d.kernel_graph.ops[2].inputs = [0];
        return d;
      },
      /has 2 input loaders for the op's 1 inputs/
    ],
    [
      'chain naming a missing op',
      d => {
        d.kernel_graph.ops[2].block_graph.thread_graph.chains.push([42]);
        return d;
      },
      /thread_graph\.chains\[6\]\[0\]: op 42 is not in the block graph/
    ],
    [
      'op in two chains',
      d => {
        d.kernel_graph.ops[2].block_graph.thread_graph.chains[0].push(1);
        return d;
      },
      /op 1 is in two fusion chains/
    ],
    ['metrics not an object', d => ({ ...d, metrics: [1] }), /^metrics: expected/]
  ];
  for (const [name, mutate, message] of bad) {
    it(`rejects ${name} with a message naming the field`, () => {
      expect(() => parseMuGraph(mutate(rmsRaw()))).toThrowError(MuGraphError);
      expect(() => parseMuGraph(mutate(rmsRaw()))).toThrowError(message);
    });
  }

  it('derives nothing it was not given: a missing thread graph stays missing', () => {
    const d = rmsRaw();
    delete d.kernel_graph.ops[2].block_graph.thread_graph;
    expect(parseMuGraph(d).kernel_graph.ops[2].block_graph!.thread_graph).toBeUndefined();
  });
});
