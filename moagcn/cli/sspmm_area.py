"""``moagcn sspmm area``: the accelerator's area and power as a 28 nm ASIC
(:mod:`moagcn.synth.asic`), beside MixGCN's sparse processing unit."""

from __future__ import annotations

from moagcn.cli.common import output_path, write_json
from moagcn.config import config_dict, parse_params
from moagcn.core.spec import get_spec
from moagcn.errors import UserError


def cmd_sspmm_area(args) -> int:
    """Area and power at 28 nm from cited per-unit figures, beside MixGCN's SPU."""
    # lazy: the synth package's import brings the synthesis flows and the gateware build
    from moagcn.synth.asic import comparison, sspmm_area
    if args.report:
        output_path(args.report, "--report")
    if not 0.0 <= args.activity <= 1.0:
        raise UserError(f"--activity {args.activity:g}: give the fraction of adder-cycles that "
                        "add, within 0..1 (the cycle model's utilization)")
    spec = get_spec("sspmm")
    params = parse_params(args.param)
    # a model of any size: the RTL's limits (64 slices) do not apply
    params.setdefault("simulate", "false")
    config = spec.config(args.preset, params)
    result = sspmm_area(config, args.activity)
    preset = args.preset or spec.default_preset
    print(f"sspmm area ({preset}, 28 nm model: adders and SRAM only; docs/sspmm.md, "
          f"'Area and power (ASIC)'):")
    width = max(len(q) for q, _, _ in comparison(result))
    print(f"  {'':{width}s}  {'this model':<44s} MixGCN SPU (Sec. 4.1)")
    for quantity, ours, paper in comparison(result):
        print(f"  {quantity:{width}s}  {ours:<44s} {paper}")
    if config.node_banks == 0 and config.slices > 1:
        print(f"  with the RTL's node and index buffer per slice (node_banks 0): "
              f"{result['sram_mib_rtl_copies']:,.0f} MiB of SRAM, "
              f"{result['area_mm2_rtl_copies']:,.0f} mm²")
    if args.report:
        write_json(args.report, {"preset": preset, "config": config_dict(config), **result})
    return 0


def register(sp_sub) -> None:
    """Add ``area`` to the ``sspmm`` command's sub-parsers."""
    a = sp_sub.add_parser("area", help="ASIC area and power at 28 nm from cited per-unit "
                                       "figures, beside MixGCN's SPU",
                          description="Charge a configuration its binary32 adders and its "
                                      "SRAM buffers at 28 nm (per-unit figures and sources "
                                      "in docs/sspmm.md, 'Area and power (ASIC)') and set it "
                                      "beside MixGCN's 283.35 mm² and 38.96 W.")
    a.add_argument("--preset", metavar="NAME", help="default, tiny, multi, paper")
    a.add_argument("--param", action="append", metavar="KEY=VALUE",
                   help="set one configuration field on top of --preset (repeatable)")
    a.add_argument("--activity", type=float, default=1.0, metavar="A",
                   help="fraction of adder-cycles that add (the cycle model's utilization; "
                        "default 1: every adder every cycle)")
    a.add_argument("--report", metavar="R.json", help="also write the figures as JSON")
    a.set_defaults(func=cmd_sspmm_area)
