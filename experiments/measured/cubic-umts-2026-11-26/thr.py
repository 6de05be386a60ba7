import csv,sys,glob,json,os
d=sys.argv[1]
rows=[json.loads(l) for l in open(f'{d}/transfers.jsonl')]
marks=[float(x) for x in os.environ.get('MARKS','1 2 3 4 5 6 7 7.5 8 8.5 9 9.2 9.4').split()]
print('transfer'.ljust(22)+' '.join(f'{m:6}' for m in marks))
for i,r in enumerate(rows,1):
    p=f'{d}/probe/{i:06d}.throughput.csv'
    if not os.path.exists(p): continue
    cum=0; series=[]
    for rr in csv.DictReader(open(p)):
        cum+=float(rr['mbps'])*0.1/8; series.append((float(rr['t_s']),cum))
    out=[]
    for m in marks:
        v=[c for t,c in series if t<=m+1e-9]
        out.append(f'{(v[-1] if v else 0):6.3f}')
    print(f"{r['scheme']:13} {r['repetition']:2} {r['tct_s']:5.2f} "+' '.join(out))
