"""The SDDMM accelerator's models: the bit-exact golden model (:mod:`.golden`) and the spec with
its cycle model (:mod:`.spec`); docs/attention.md."""
