"""Named wrong answers of the wgsl exercise that its Python-side checks catch (interface,
workgroup-memory budget), so the generic test grades them without a GPU. The bugs only a GPU
run shows are :mod:`.planted_bugs`, run through wgpu-py by tests/exercises/test_wgsl.py.
Rows as in the other folders: ``old`` occurs exactly once; ``fails=None``: every graded check.
"""
from __future__ import annotations

from collections import namedtuple

Wrong = namedtuple("Wrong", "name step old new fails")

WRONG_ANSWERS = [
    Wrong('tiles-over-budget', 'harden',
          'override BR: u32;\noverride BC: u32;',
          'override BR: u32 = 64;\noverride BC: u32 = 64;',
          fails=['budget']),
    Wrong('lse-binding-renumbered', 'harden',
          '@group(0) @binding(6) var<storage, read_write> lse: array<f32>;',
          '@group(0) @binding(7) var<storage, read_write> lse: array<f32>;',
          fails=['interface']),
    Wrong('o-read-only', 'harden',
          '@group(0) @binding(5) var<storage, read_write> o: array<f32>;',
          '@group(0) @binding(5) var<storage, read> o: array<f32>;',
          fails=['interface']),
]
