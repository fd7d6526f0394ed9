"""``hydraulis export``: a checkpoint as a Hugging Face Llama directory."""

from __future__ import annotations

import argparse

from hydraulis.base import limits
from hydraulis.cli.arguments import Bounded, FileKind, InputFile, OutputPath
from hydraulis.cli.output import emit


def register(commands: argparse._SubParsersAction) -> None:
    export = commands.add_parser(
        "export", help="write a checkpoint as a Hugging Face Llama directory (config.json, safetensors shards)",
        description="Write the checkpoint folder CHECKPOINT (a step-NNNNNNNN folder that hydraulis train wrote, "
                    "whatever strategy and optimizer layout trained it) as a Hugging Face directory that "
                    "transformers loads with LlamaForCausalLM.from_pretrained: config.json, the weights in "
                    "safetensors shards of at most --max-shard-bytes each (one shard: model.safetensors; "
                    "several: model-0000k-of-0000n.safetensors and model.safetensors.index.json). Streams shard "
                    "by shard (memory about one shard); writes OUTPUT.partial and renames it at the end; refuses "
                    "an OUTPUT that exists and is not empty.")
    export.add_argument("checkpoint", metavar="CHECKPOINT", type=InputFile(FileKind.CHECKPOINT), help="checkpoint folder, e.g. ckpt/step-00000100")
    export.add_argument("-o", "--output", required=True, type=OutputPath(), help="new directory for the Hugging Face model")
    export.add_argument("--dtype", choices=("float32", "bfloat16", "float16"), default="float32",
                        help="dtype of the written weights (default float32, the master weights exactly)")
    export.add_argument("--max-shard-bytes", type=Bounded(limits.SHARD_BYTES), default=5 * 10**9,
                        help="largest safetensors file (default 5e9, transformers' 5GB)")
    export.set_defaults(run=_export)


def _export(args: argparse.Namespace) -> None:
    from hydraulis.runtime.checkpoint.hf_export import export_checkpoint

    summary = export_checkpoint(args.checkpoint, args.output, args.dtype, args.max_shard_bytes)
    emit(f"wrote {summary.folder}: config.json and {len(summary.files)} safetensors file(s), "
         f"{summary.total_bytes:,} bytes of {args.dtype} weights")
