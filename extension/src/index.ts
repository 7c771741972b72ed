/**
 * JupyterLab MIME extension: renders `application/vnd.mirage-lab.mugraph+json`
 * (the bundle mirage_lab's `_repr_mimebundle_` emits) as an interactive inspector.
 *
 * It is a pure renderer: saved notebooks show the inspector with no kernel
 * running. It declares itself safe (it builds DOM from data, never markup), so
 * untrusted notebooks render it too; rank 0 puts it ahead of the SVG fallback.
 */
import type { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { MIME_TYPE } from './mugraph';
import { MuGraphInspector } from './widget';

export const rendererFactory: IRenderMime.IRendererFactory = {
  safe: true,
  mimeTypes: [MIME_TYPE],
  defaultRank: 0,
  createRenderer: options => new MuGraphInspector(options)
};

const extension: IRenderMime.IExtension = {
  id: 'mirage-lab-mugraph:plugin',
  rendererFactory,
  rank: 0,
  dataType: 'json'
};

export default extension;
