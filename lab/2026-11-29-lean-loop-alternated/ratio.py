# The new step over step g, process by process, from tools/acceptance/sustained.py --json files: the mean of the
# logarithms of the per-process ratios (NVBench TFLOP/s; paired % of cuBLAS) with its 95% t-interval.
# Usage: python3 ratio.py FILE.json [FILE.json ...]
import json, math, statistics as st, sys
from scipy import stats
def ci(x):
    m=st.mean(x); s=st.stdev(x)/math.sqrt(len(x)); t=stats.t.ppf(.975,len(x)-1)
    return f"{100*(math.exp(m)-1):+.2f}% (95% interval {100*(math.exp(m-t*s)-1):+.2f} to {100*(math.exp(m+t*s)-1):+.2f})"
for f in sys.argv[1:]:
    d=json.load(open(f)); p0=d['processes'][0]
    prec=[k for k in p0 if k.endswith('cublas')][0].split('/')[0]
    lean,g=f'{prec}/wgmma_lean_loop',f'{prec}/wgmma_grouped_tma_store'
    r=[math.log(p[lean]['tflops']/p[g]['tflops']) for p in d['processes']]
    pr=[math.log(p[lean]['paired_percent']/p[g]['paired_percent']) for p in d['processes']]
    print(f.split('/')[-1], 'reversed', d['reversed'])
    print('  NVBench TFLOP/s, new step over g, per process:', ', '.join(f"{100*(math.exp(x)-1):+.2f}" for x in r), '; mean', ci(r))
    print('  paired %, new step over g, per process:', ', '.join(f"{100*(math.exp(x)-1):+.2f}" for x in pr), '; mean', ci(pr))
