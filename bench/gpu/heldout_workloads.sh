# The held-out workloads (bench/h200/record_workloads.py, data/h200_heldout*) as the GPU scripts
# run them through bench/gpu/workload_loop.py; sourced by workloads_emo.sh and
# launch_period_check.sh.
#   HELDOUT_WORKLOADS            the eleven names
#   heldout_steps WORKLOAD MS    the steps that make about MS milliseconds of its sync loop

# Median step (ms) of each workload's sync loop, from data/h200_heldout*/truth.json.
declare -A HELDOUT_STEP_MS=([mlp_small_train]=7.8 [bert_infer]=2.7 [cnn_dataload_train]=5.5 [gpt_small_train]=16.7
                            [resnet_small_train]=7.9 [lstm_lm_train]=9.9 [stream_chain]=0.84 [fp32_mlp_train]=4.4
                            [tiny_ops]=3.9 [conv_infer]=2.0 [llm_prefill_infer]=11.0)
HELDOUT_WORKLOADS=(mlp_small_train bert_infer cnn_dataload_train gpt_small_train resnet_small_train lstm_lm_train
                   stream_chain fp32_mlp_train tiny_ops conv_infer llm_prefill_infer)

heldout_steps() {  # workload, milliseconds
  awk -v ms="${HELDOUT_STEP_MS[$1]}" -v total="$2" 'BEGIN { printf "%d", total / ms }'
}
