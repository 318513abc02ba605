# bash completion for tpx-train (examples/train) — installed with it by
# `meson install` into <datadir>/bash-completion/completions/tpx-train.
_tpx_train() {
  local cur prev
  cur=${COMP_WORDS[COMP_CWORD]}
  prev=${COMP_WORDS[COMP_CWORD-1]}
  case $prev in
    --model) COMPREPLY=($(compgen -d -- "$cur")); return ;;
    --tokens) COMPREPLY=($(compgen -f -- "$cur")); return ;;
    --dump-params|--dump-grads)
      COMPREPLY=($(compgen -f -X '!*.safetensors' -- "$cur") $(compgen -d -- "$cur")); return ;;
    --backend) COMPREPLY=($(compgen -W "local mpi" -- "$cur")); return ;;
    --format) COMPREPLY=($(compgen -W "text json" -- "$cur")); return ;;
    --cp-layout) COMPREPLY=($(compgen -W "head-tail contiguous" -- "$cur")); return ;;
    --moe-dispatcher) COMPREPLY=($(compgen -W "all-gather all-to-all" -- "$cur")); return ;;
    --tp|--dp-shard|--dp-replicate|--cp|--ep) COMPREPLY=($(compgen -W "1 2 4 8 16 32 64" -- "$cur")); return ;;
    --batch|--seq|--steps|--lr|--clip|--weight-decay|--diverge-factor) return ;;
  esac
  COMPREPLY=($(compgen -W "--model --tokens --batch --seq --steps --lr --clip --weight-decay --tp --dp-shard --dp-replicate --cp --cp-layout --ep --moe-dispatcher --sp --offload --activation-checkpointing --activation-checkpointing-modules --backend --format --dump-params --dump-grads --diverge-factor --blas-info --help" -- "$cur"))
}
complete -F _tpx_train tpx-train
