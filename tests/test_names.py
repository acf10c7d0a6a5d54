from __future__ import annotations

import shutil

import pytest

from kprof.ingest.names import LABEL_CHARS, demangle_all, short_name, table_labels


@pytest.mark.parametrize(
    ("name", "short"),
    [
        (
            "void at::native::(anonymous namespace)::indexSelectSmallIndex<c10::BFloat16, long, 2>"
            "(at::cuda::detail::TensorInfo<c10::BFloat16, unsigned int>, long)",
            "at::native::(anonymous namespace)::indexSelectSmallIndex",
        ),
        (
            "void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl<F>(at::TensorIteratorBase&, "
            "F const&)::{lambda(int)#1}>(int, "
            "at::native::gpu_kernel_impl<F>(at::TensorIteratorBase&)::{lambda(int)#1})",
            "at::native::elementwise_kernel",
        ),
        ("triton_poi_fused_add_cos_sin_0", "triton_poi_fused_add_cos_sin_0"),
        ("_fwd_kernel_stage1", "_fwd_kernel_stage1"),
        ("bodyForce(Body*, float, int) [clone .kd]", "bodyForce"),
        ("__amd_rocclr_copyBuffer.kd", "__amd_rocclr_copyBuffer"),
        (
            "ampere_bf16_s16816gemm_bf16_128x64_ldg8_f2f_stages_64x3_tn",
            "ampere_bf16_s16816gemm_bf16_128x64_ldg8_f2f_stages_64x3_tn",
        ),
        ("bool operator<<int>(int, int)", "operator<"),
    ],
)
def test_short_name(name: str, short: str) -> None:
    assert short_name(name) == short


@pytest.mark.skipif(shutil.which("c++filt") is None, reason="no c++filt on this machine")
def test_demangle_batch_knows_bf16_and_strips_kd() -> None:
    out = demangle_all(
        [
            "_ZN5aiter24add_rmsnorm_quant_kernelIDF16bDF16bLi256ELi16ELb0ELb0ELb1ELi1EEEvPT0_PT_PfS4_S4_S4_diiiiiiib",
            "_Z15addition_kernelIfEvPT_PKfS3_ii.kd",
            "_Znot_a_real_name",
            "plain_name",
        ]
    )
    assert (
        out["_Z15addition_kernelIfEvPT_PKfS3_ii.kd"] == "void addition_kernel<float>(float*, float const*, "
        "float const*, int, int)"
    )
    assert out[
        "_ZN5aiter24add_rmsnorm_quant_kernelIDF16bDF16bLi256ELi16ELb0ELb0ELb1ELi1EEEvPT0_PT_PfS4_S4_S4_diiiiiiib"
    ].startswith("void aiter::add_rmsnorm_quant_kernel<std::bfloat16_t")
    assert out["_Znot_a_real_name"] == "_Znot_a_real_name"
    assert "plain_name" not in out


@pytest.mark.skipif(shutil.which("c++filt") is None, reason="no c++filt on this machine")
def test_long_ck_and_cutlass_names_are_demangled() -> None:
    """CK and CUTLASS kernels of 1,500–2,000 characters hit plain c++filt's recursion limit."""
    from conftest import real
    from kprof.ingest.load import load_trace

    for name in ("tracelens_mi300_resnet_act_checkpoint.json.gz", "hta_nccl_data.json.gz"):
        events = load_trace(real(name)).events
        assert not any(str(n).startswith("_Z") for n in events["name"].unique()), name
    shorts = set(load_trace(real("tracelens_mi300_resnet_act_checkpoint.json.gz")).events["short_name"].astype(str))
    assert "ck::tensor_operation::device::(anonymous namespace)::kernel_grouped_conv_fwd_xdl_cshuffle_v3" in shorts


def test_a_demangler_without_the_flag_is_asked_again_plainly(tmp_path, monkeypatch) -> None:
    """An older c++filt that rejects --no-recurse-limit still demangles what it can."""
    fake = tmp_path / "c++filt"
    fake.write_text('#!/bin/sh\n[ "$#" -gt 0 ] && exit 1\nexec /bin/sed "s/^_Z3foov$/foo()/"\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert demangle_all(["_Z3foov", "plain"]) == {"_Z3foov": "foo()"}


def test_kernels_that_share_a_short_name_are_labelled_apart() -> None:
    """The recorded eager trace has 11 ``vectorized_elementwise_kernel`` instantiations: a table
    that showed only short names had eleven rows alike."""
    from conftest import EAGER
    from kprof.ingest.load import load_trace

    kernels = load_trace(EAGER).events.drop_duplicates("name")
    names, shorts = kernels["name"].astype(str).tolist(), kernels["short_name"].astype(str).tolist()
    labels = table_labels(names, shorts)
    assert len(set(labels)) == len(labels) == len(names)
    shared = {s for s in shorts if shorts.count(s) > 1}
    assert "at::native::vectorized_elementwise_kernel" in shared
    for label, short in zip(labels, shorts):
        if short in shared:  # told apart by its template arguments, namespaces dropped
            assert label.startswith(short + "<") and "at::native::" not in label[len(short) :], label
        else:
            assert label == short
    assert any("sin_kernel_cuda::{lambda(float)#1}" in label for label in labels)
    assert all(len(label) - len(short) <= max(LABEL_CHARS - len(short), 40) for label, short in zip(labels, shorts))


def test_labels_show_where_long_names_differ_then_parameters_then_a_number() -> None:
    long_a = "void ns::k<" + "Tile<128>, " * 20 + "Epilogue<float>>(int)"
    long_b = "void ns::k<" + "Tile<128>, " * 20 + "Epilogue<half>>(int)"
    a, b = table_labels([long_a, long_b], ["ns::k", "ns::k"])
    assert a != b and a.startswith("ns::k…") and "Epilogue<float>>" in a and "Epilogue<half>>" in b
    assert table_labels(["void k<int>(float*)", "void k<int>(double*)"], ["k", "k"]) == [
        "k<int>(float*)",
        "k<int>(double*)",
    ]
    # alike in all but the return type: numbered in order of full name
    assert table_labels(["void k<int>(int)", "int k<int>(int)"], ["k", "k"]) == ["k<int>(int) #2", "k<int>(int) #1"]
    assert table_labels(["mm", "mm_2"], ["mm", "mm_2"]) == ["mm", "mm_2"]
