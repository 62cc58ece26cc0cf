"""Write cost of a command before and after the head record, as DynamoDB Local reports it
(ReturnConsumedCapacity=TOTAL): the requests the command handler sends, on throwaway tables.
Run with DynamoDB Local at http://127.0.0.1:8000: python3 bench/write_cost.py (see bench/write-cost.md)."""
import boto3, uuid
c = boto3.client("dynamodb", endpoint_url="http://127.0.0.1:8000", region_name="us-east-1",
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
c.delete_table(TableName=cmd); c.delete_table(TableName=idem)
