/**
 * JupyterLab MIME extension: renders `application/vnd.mirage-lab.mugraph+json`
 * (the bundle mirage_lab's `_repr_mimebundle_` and `mi.inspect` emit) as an
 * interactive inspector, and `application/vnd.mirage-lab.mugraph-compare+json`
 * (`mi.compare`) as two inspectors side by side.
 *
 * They are pure renderers: saved notebooks show them with no kernel running. They
 * declare themselves safe (DOM from data, never markup), so untrusted notebooks
 * render them too; rank 0 puts them ahead of the SVG/HTML fallbacks.
 */
import type { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { MuGraphCompare } from './compare';
import { COMPARE_MIME_TYPE, MIME_TYPE } from './mugraph';
import { MuGraphInspector } from './widget';

export const rendererFactory: IRenderMime.IRendererFactory = {
  safe: true,
  mimeTypes: [MIME_TYPE],
  defaultRank: 0,
  createRenderer: options => new MuGraphInspector(options)
};

export const compareRendererFactory: IRenderMime.IRendererFactory = {
  safe: true,
  mimeTypes: [COMPARE_MIME_TYPE],
  defaultRank: 0,
  createRenderer: options => new MuGraphCompare(options)
};

const extensions: IRenderMime.IExtension[] = [
  {
    id: 'mirage-lab-mugraph:plugin',
    rendererFactory,
    rank: 0,
    dataType: 'json'
  },
  {
    id: 'mirage-lab-mugraph:compare',
    rendererFactory: compareRendererFactory,
    rank: 0,
    dataType: 'json'
  }
];

export default extensions;
