# bash completion for tpx — installed by `meson install` into
# <datadir>/bash-completion/completions/tpx.
_tpx() {
  local cur prev cmd
  cur=${COMP_WORDS[COMP_CWORD]}
  prev=${COMP_WORDS[COMP_CWORD-1]}
  cmd=${COMP_WORDS[1]}
  if [ "$COMP_CWORD" -eq 1 ]; then
    COMPREPLY=($(compgen -W "plan plugins check-plugin shard merge --help --version" -- "$cur"))
    return
  fi
  case $prev in
    --config|--plan) COMPREPLY=($(compgen -f -X '!*.json' -- "$cur") $(compgen -d -- "$cur")); return ;;
    --weights) COMPREPLY=($(compgen -f -- "$cur")); return ;;
    --dir|--in|--out) COMPREPLY=($(compgen -d -- "$cur")); return ;;
    --max-shard-size|--rank|--run-id) return ;;
    --format) COMPREPLY=($(compgen -W "text json" -- "$cur")); return ;;
    --tp|--dp-shard|--dp-replicate|--cp|--ep|--gpus) COMPREPLY=($(compgen -W "1 2 4 8 16 32 64" -- "$cur")); return ;;
    --optimizer) COMPREPLY=($(compgen -W "adamw sgd none" -- "$cur")); return ;;
    --dtype) COMPREPLY=($(compgen -W "bf16 f16 f32" -- "$cur")); return ;;
    --attention) COMPREPLY=($(compgen -W "flash sdpa eager" -- "$cur")); return ;;
    --html) COMPREPLY=($(compgen -f -X '!*.html' -- "$cur") $(compgen -d -- "$cur")); return ;;
    --batch|--seq|--gpu-mem|--host-mem|--show|--rank) return ;;
    --timeout|--threads) return ;;
  esac
  case $cmd in
    plan)
      COMPREPLY=($(compgen -W "--config --weights --dtype --tp --dp-shard --dp-replicate --cp --ep --offload --sp --plan --no-fsdp --no-isolation --summary --format --html --optimizer --batch --seq --activation-checkpointing --attention --loss-in-place --gpus --gpu-mem --host-mem --show --rank --help" -- "$cur")) ;;
    plugins)
      COMPREPLY=($(compgen -W "--format --dir --help" -- "$cur")) ;;
    shard)
      COMPREPLY=($(compgen -W "--weights --config --tp --dp-shard --dp-replicate --cp --ep --sp --plan --rank --no-fsdp --no-isolation --out --allow-errors --run-id --force --help" -- "$cur")) ;;
    merge)
      COMPREPLY=($(compgen -W "--in --out --max-shard-size --force --help" -- "$cur")) ;;
    check-plugin)
      if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "--config --format --timeout --threads --help" -- "$cur"))
      else
        COMPREPLY=($(compgen -f -X '!*.so' -- "$cur") $(compgen -d -- "$cur"))
      fi ;;
  esac
}
complete -F _tpx tpx
