#!/usr/bin/env bash
# Start a reference Apache Kafka broker (single KRaft combined broker+controller node,
# loopback only) from jars resolved out of Maven Central. Used for differential tests and
# to validate tests/interop against the real thing:
#
#   compat/kafka/start.sh [BROKER_PORT [DATA_DIR [CONTROLLER_PORT]]]
#   PYDMQ_TEST_BOOTSTRAP=127.0.0.1:BROKER_PORT ./scripts/test tests/interop
#
# Defaults: broker 127.0.0.1:19092, controller 127.0.0.1:19093, data in a fresh temp dir.
# Extra broker properties: KAFKA_EXTRA_PROPS="num.partitions=3 foo=bar"; values with spaces
# (a JAAS line) in a file appended as it is: KAFKA_EXTRA_PROPS_FILE=path. Extra arguments of
# the storage format (e.g. --add-scram 'SCRAM-SHA-256=[name=a,password=b]', one per line):
# KAFKA_FORMAT_ARGS_FILE=path.
# The script execs the JVM, so its PID is the broker's PID.
#
# One node of a multi-node KRaft cluster (static quorum; every node broker + controller):
#   KAFKA_NODE_ID=2 KAFKA_QUORUM_VOTERS=1@127.0.0.1:C1,2@127.0.0.1:C2,3@127.0.0.1:C3 \
#   KAFKA_CLUSTER_ID=<22-char base64 uuid, the same on every node> \
#       compat/kafka/start.sh BROKER_PORT DATA_DIR CONTROLLER_PORT
# Internal topics then get replication factor = number of voters (min ISR 2, Kafka's default).
# KAFKA_CLUSTER_ID alone (single node) skips generating a random one.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
port="${1:-19092}"
data="${2:-$(mktemp -d /tmp/pydmq-refkafka.XXXXXX)}"
cport="${3:-$((port + 1))}"
dist="$here/dist"
node_id="${KAFKA_NODE_ID:-1}"
voters="${KAFKA_QUORUM_VOTERS:-}"
if [ -n "$voters" ]; then
    if [ -z "${KAFKA_CLUSTER_ID:-}" ]; then
        echo "compat/kafka: KAFKA_QUORUM_VOTERS needs KAFKA_CLUSTER_ID (the same on every node)" >&2
        exit 2
    fi
    quorum="controller.quorum.voters=$voters"
    IFS=, read -r -a voter_list <<<"$voters"
    rf="${#voter_list[@]}"
    min_isr=$((rf < 2 ? 1 : 2))
else
    quorum="controller.quorum.bootstrap.servers=127.0.0.1:$cport"
    rf=1
    min_isr=1
fi

if ! ls "$dist"/kafka_2.13-*.jar >/dev/null 2>&1; then
    echo "compat/kafka: resolving Apache Kafka jars into $dist" >&2
    (cd "$here" && mvn -B -q dependency:copy-dependencies -DoutputDirectory=dist -DincludeScope=runtime) >&2
fi

mkdir -p "$data/logs"
props="$data/server.properties"
cat >"$props" <<PROPS
process.roles=broker,controller
node.id=$node_id
$quorum
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport
advertised.listeners=PLAINTEXT://127.0.0.1:$port
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=$data/logs
num.partitions=1
offsets.topic.replication.factor=$rf
transaction.state.log.replication.factor=$rf
transaction.state.log.min.isr=$min_isr
share.coordinator.state.topic.replication.factor=$rf
share.coordinator.state.topic.min.isr=$min_isr
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=true
PROPS
for kv in ${KAFKA_EXTRA_PROPS:-}; do
    echo "$kv" >>"$props"
done
if [ -n "${KAFKA_EXTRA_PROPS_FILE:-}" ]; then
    # properties whose values hold spaces (a JAAS line); a key set here wins over the above
    cat "$KAFKA_EXTRA_PROPS_FILE" >>"$props"
fi
format_args=()
if [ -n "${KAFKA_FORMAT_ARGS_FILE:-}" ]; then
    mapfile -t format_args <"$KAFKA_FORMAT_ARGS_FILE"
fi

cp=("$dist"/*.jar)
cp="$(IFS=:; echo "${cp[*]}")"
jvm=(java -Xms256m -Xmx1g -XX:+UseG1GC -Djava.awt.headless=true
     -Dorg.slf4j.simpleLogger.defaultLogLevel="${KAFKA_LOG_LEVEL:-warn}" -cp "$cp")

if [ ! -f "$data/logs/meta.properties" ]; then
    cluster_id="${KAFKA_CLUSTER_ID:-$("${jvm[@]}" kafka.tools.StorageTool random-uuid)}"
    if [ -n "$voters" ]; then
        "${jvm[@]}" kafka.tools.StorageTool format -t "$cluster_id" -c "$props" "${format_args[@]}" >&2
    else
        "${jvm[@]}" kafka.tools.StorageTool format --standalone -t "$cluster_id" -c "$props" \
            "${format_args[@]}" >&2
    fi
fi
echo "compat/kafka: starting Apache Kafka node $node_id on 127.0.0.1:$port (data $data)" >&2
exec "${jvm[@]}" kafka.Kafka "$props"
