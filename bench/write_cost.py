"""Write cost of a command before and after the head record, and of a constrained create (issue 38:
unique, limits and references declared in model.toml) beside an unconstrained one, as DynamoDB
Local reports it (ReturnConsumedCapacity=TOTAL) and as DynamoDB's rules price it: the requests the
command handler sends, on throwaway tables.
Run with DynamoDB Local (AWS_ENDPOINT_URL_DYNAMODB, default http://127.0.0.1:8000):
python3 bench/write_cost.py (see bench/write-cost.md)."""
import math, os, boto3, uuid
c = boto3.client("dynamodb", endpoint_url=os.environ.get("AWS_ENDPOINT_URL_DYNAMODB", "http://127.0.0.1:8000"), region_name="us-east-1",
                 aws_access_key_id="local", aws_secret_access_key="local")
sfx = uuid.uuid4().hex[:8]
cmd, idem = f"wcu-cmd-{sfx}", f"wcu-idem-{sfx}"
c.create_table(TableName=cmd, BillingMode="PAY_PER_REQUEST",
  AttributeDefinitions=[{"AttributeName":"pk","AttributeType":"S"},{"AttributeName":"sk","AttributeType":"S"}],
  KeySchema=[{"AttributeName":"pk","KeyType":"HASH"},{"AttributeName":"sk","KeyType":"RANGE"}])
c.create_table(TableName=idem, BillingMode="PAY_PER_REQUEST",
  AttributeDefinitions=[{"AttributeName":"pk","AttributeType":"S"}],
  KeySchema=[{"AttributeName":"pk","KeyType":"HASH"}])
def item(n, size):
    return {"pk":{"S":"PRODUCT#t1"},"sk":{"S":f"P{n}@1"},"id":{"S":f"PRODUCT#t1#P{n}"},"version":{"N":"1"},
            "attributes":{"M":{"blob":{"S":"x"*size}}}}
rec = lambda k: {"pk":{"S":k},"fingerprint":{"S":"f"*64},"itemPk":{"S":"PRODUCT#t1"},"itemSk":{"S":"P@1"},
                 "itemId":{"S":"PRODUCT#t1#P"},"version":{"N":"1"},"ttl":{"N":"4000000000"}}
head = lambda n: {"pk":{"S":f"HEAD#PRODUCT#t1@P{n}"},"latest":{"N":"1"}}
def tot(r): return sum(x["CapacityUnits"] for x in r["ConsumedCapacity"]) if isinstance(r["ConsumedCapacity"], list) else r["ConsumedCapacity"]["CapacityUnits"]
n=0
for size in [200, 900, 3000]:
    n+=1; b = c.put_item(TableName=cmd, Item=item(n,size), ConditionExpression="attribute_not_exists(pk)", ReturnConsumedCapacity="TOTAL")
    n+=1; bk = c.transact_write_items(TransactItems=[{"Put":{"TableName":cmd,"Item":item(n,size),"ConditionExpression":"attribute_not_exists(pk)"}},{"Put":{"TableName":idem,"Item":rec(f"k{n}"),"ConditionExpression":"attribute_not_exists(pk)"}}], ReturnConsumedCapacity="TOTAL")
    n+=1; a = c.transact_write_items(TransactItems=[{"Put":{"TableName":cmd,"Item":item(n,size),"ConditionExpression":"attribute_not_exists(pk)"}},{"Put":{"TableName":idem,"Item":head(n),"ConditionExpression":"attribute_not_exists(pk)"}}], ReturnConsumedCapacity="TOTAL")
    n+=1; ak = c.transact_write_items(TransactItems=[{"Put":{"TableName":cmd,"Item":item(n,size),"ConditionExpression":"attribute_not_exists(pk)"}},{"Put":{"TableName":idem,"Item":head(n),"ConditionExpression":"attribute_not_exists(pk)"}},{"Put":{"TableName":idem,"Item":rec(f"k{n}"),"ConditionExpression":"attribute_not_exists(pk)"}}], ReturnConsumedCapacity="TOTAL")
    # reads: head get (consistent)
    g = c.get_item(TableName=idem, Key={"pk":{"S":f"HEAD#PRODUCT#t1@P{n}"}}, ConsistentRead=True, ReturnConsumedCapacity="TOTAL")
    print(size, "bytes: before", tot(b), "WCU (PutItem),", tot(bk), "WCU (with key); after", tot(a), "WCU,", tot(ak), "WCU (with key) as reported; head read", tot(g), "RCU"); print("  3-item transaction as reported:", ak["ConsumedCapacity"])
# -1 read before: query over all versions of one item with 20 versions of 900 B
for v in range(1,21):
    it=item(999,900); it["sk"]={"S":f"P999@{v}"}; c.put_item(TableName=cmd, Item=it)
q = c.query(TableName=cmd, KeyConditionExpression="pk = :pk AND begins_with(sk, :p)", ExpressionAttributeValues={":pk":{"S":"PRODUCT#t1"},":p":{"S":"P999@"}}, ProjectionExpression="sk", ConsistentRead=True, ReturnConsumedCapacity="TOTAL")
print("query 20 versions x 900B RCU", tot(q))

# Issue 38: a constrained create beside an unconstrained one, the transactions exactly as the command
# handler builds them for the lending library's model (tests/library/model.toml): a copy (unique
# copy_number; copies are referenced by loans, so their head mirrors mv/del/m), a loan (limit
# loans_out joined; references copy and member checked on their heads), and a copy update that
# changes copyNo (its unique value moved: a release and a claim). Each is ONE TransactWriteItems;
# the reads in front of it are the command's as without constraints (create: none; version N: its
# base row), counted by functions/command-handler/tests/round_trips.rs.
def size_of(av):
    """DynamoDB's item size rule, close enough for these small items: names + values in bytes."""
    total = 0
    for name, value in av.items():
        total += len(name.encode())
        (kind, v), = value.items()
        if kind in ("S", "N"): total += len(str(v).encode())
        elif kind == "BOOL": total += 1
        elif kind == "SS": total += sum(len(x.encode()) for x in v)
        elif kind == "M": total += 3 + size_of(v)
    return total
def rule_wcu(actions):
    """DynamoDB's rule: every action of a TransactWriteItems, ConditionCheck included, 2 WCU per KB
    (rounded up) of the item it touches."""
    return sum(2 * max(1, math.ceil(size / 1024)) for size in actions)
def version_row(pk, sk, v, attrs):
    return {"pk":{"S":pk},"sk":{"S":f"{sk}@{v}"},"id":{"S":f"{pk}#{sk}"},"version":{"N":str(v)},
            "code":{"S":sk},"name":{"S":sk},"tenantCode":{"S":"t1"},"type":{"S":pk.split("#")[0]},
            "isDeleted":{"BOOL":False},"createdAt":{"S":"2026-11-27T20:00:00.000Z"},"createdBy":{"S":"librarian"},
            "createdIp":{"S":"127.0.0.1"},"updatedAt":{"S":"2026-11-27T20:00:00.000Z"},"updatedBy":{"S":"librarian"},
            "updatedIp":{"S":"127.0.0.1"},"requestId":{"S":"r"*36},"entity":{"S":pk.split("#")[0].lower()},
            "attributes":{"M":attrs}}
def head_put(pk, sk, v, mirror=None):
    h = {"pk":{"S":f"HEAD#{pk}@{sk}"},"latest":{"N":str(v)}}
    if mirror is not None:
        h.update({"mv":{"N":str(v)},"del":{"BOOL":False},"m":{"M":mirror}})
    cond = "attribute_not_exists(pk)" if v == 1 else "latest = :prev"
    put = {"Put":{"TableName":idem,"Item":h,"ConditionExpression":cond}}
    if v > 1: put["Put"]["ExpressionAttributeValues"] = {":prev":{"N":str(v-1)}}
    return put, size_of(h)
def row_put(row):
    return {"Put":{"TableName":cmd,"Item":row,"ConditionExpression":"attribute_not_exists(pk)"}}, size_of(row)
def claim(key, pk, sk):
    g = {"pk":{"S":key},"c":{"S":"copy.copy_number"},"v":{"SS":["9780140449136","1"]},"o":{"S":pk},"s":{"S":sk}}
    return {"Put":{"TableName":idem,"Item":g,"ConditionExpression":"attribute_not_exists(pk) OR (o = :o AND s = :s)",
            "ExpressionAttributeValues":{":o":{"S":pk},":s":{"S":sk}}}}, size_of(g)
def release(key, pk, sk):
    return {"Delete":{"TableName":idem,"Key":{"pk":{"S":key}},"ConditionExpression":"attribute_not_exists(pk) OR (o = :o AND s = :s)",
            "ExpressionAttributeValues":{":o":{"S":pk},":s":{"S":sk}}}}, 150
def join(key, token, members_before):
    return {"Update":{"TableName":idem,"Key":{"pk":{"S":key}},"UpdateExpression":"ADD m :t SET c = :c",
            "ConditionExpression":"attribute_not_exists(m) OR size(m) < :n OR contains(m, :id)",
            "ExpressionAttributeValues":{":t":{"SS":[token]},":id":{"S":token},":n":{"N":"3"},":c":{"S":"loan.loans_out"}}}}, 60 + 23 * (members_before + 1)
def require(pk, sk, unless=None):
    cc = {"ConditionCheck":{"TableName":idem,"Key":{"pk":{"S":f"HEAD#{pk}@{sk}"}},
          "ConditionExpression":"attribute_exists(pk) AND mv = latest AND del = :f" + (" AND NOT (m.#u IN (:t))" if unless else ""),
          **({"ExpressionAttributeNames":{"#u":"reference"}} if unless else {}),
          "ExpressionAttributeValues":{":f":{"BOOL":False}, **({":t":{"S":"true"}} if unless else {})}}}
    return cc, 120
def run(label, actions):
    r = c.transact_write_items(TransactItems=[a for a, _ in actions], ReturnConsumedCapacity="TOTAL")
    reported = tot(r)
    print(f"  {label}: {len(actions)} items, 1 TransactWriteItems; DynamoDB Local reports {reported:g} WCU;"
          f" DynamoDB's rule {rule_wcu([s for _, s in actions])} WCU")
    return reported
print("constrained creates (issue 38), the library's model:")
book = {"isbn":{"S":"9780140449136"},"copyNo":{"N":"1"},"branch":{"S":"main"},"shelf":{"S":"A1"}}
run("unconstrained create (a book: version row + head)",
    [row_put(version_row("BOOK#t1", "9780140449136", 1, {"isbn":{"S":"9780140449136"},"title":{"S":"The Odyssey"}})),
     head_put("BOOK#t1", "9780140449136", 1)])
run("copy create (+ unique claim; head with its mirror)",
    [row_put(version_row("COPY#t1", "c1", 1, {"copyId":{"S":"c1"}, **book})),
     head_put("COPY#t1", "c1", 1, {"reference":{"S":"false"}}), claim("GUARD#t1#copy#copy_number#aaaaaaaaaaaaaaaaaaaaaa", "COPY#t1", "c1")])
run("member create (referenced by loans: head with its mirror)",
    [row_put(version_row("MEMBER#t1", "m1", 1, {"memberId":{"S":"m1"},"name":{"S":"Ada"},"tier":{"S":"basic"}})),
     head_put("MEMBER#t1", "m1", 1, {})])
loan = {"loanId":{"S":"01KBLOANLOANLOANLOANLOAN01"},"memberId":{"S":"m1"},"copyId":{"S":"c1"},"status":{"S":"out"},"dueDay":{"S":"2026-12-24"}}
run("loan create (+ limit join, + copy and member reference checks)",
    [row_put(version_row("LOAN#t1", "01KBLOANLOANLOANLOANLOAN01", 1, loan)), head_put("LOAN#t1", "01KBLOANLOANLOANLOANLOAN01", 1),
     join("GUARD#t1#loan#loans_out#bbbbbbbbbbbbbbbbbbbbbb", "tokentokentokentoken01", 0),
     require("COPY#t1", "c1", unless=True), require("MEMBER#t1", "m1")])
run("loan create, unconstrained (the same loan without its declarations)",
    [row_put(version_row("LOAN#t1", "01KBLOANLOANLOANLOANLOAN02", 1, loan)), head_put("LOAN#t1", "01KBLOANLOANLOANLOANLOAN02", 1)])
book2 = dict(book); book2["copyNo"] = {"N":"2"}
run("copy update moving copyNo 1 -> 2 (version N: + release + claim; 2 round trips with its base read)",
    [row_put(version_row("COPY#t1", "c1", 2, {"copyId":{"S":"c1"}, **book2})), head_put("COPY#t1", "c1", 2, {"reference":{"S":"false"}}),
     release("GUARD#t1#copy#copy_number#aaaaaaaaaaaaaaaaaaaaaa", "COPY#t1", "c1"), claim("GUARD#t1#copy#copy_number#cccccccccccccccccccccc", "COPY#t1", "c1")])
run("copy update touching no constraint (shelf moved: version + head)",
    [row_put(version_row("COPY#t1", "c1", 3, {"copyId":{"S":"c1"}, **book2, "shelf":{"S":"B2"}})), head_put("COPY#t1", "c1", 3, {"reference":{"S":"false"}})])
c.delete_table(TableName=cmd); c.delete_table(TableName=idem)
