import socket

target = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
target.connect(("localhost", 9092))

# target.send(encode([
#     "00 00 00 23",  # message size
#     "00 12",  # request api key
#     "00 04",  # request api version
#     "00 00 00 07",  # correlation id

#     # client id
#     "00 09",  # length
#     "6b 61 66 6b 61 2d 63 6c 69",  # utf-8 data

#     "00",  # "empty tagged field array" -> varint 0

#     # client software name
#     "0a",  # length -> varint n+1 -> 9
#     "6b 61 66 6b 61 2d 63 6c 69",  # utf-8 data

#     # client software version
#     "04",  # length -> varint n+1 -> 3
#     "30 2e 31",  # utf-8 data

#     "00",  # "empty tagged field array" -> varint 0
# ]))

target.send(bytes.fromhex(
    "00000060"
    "00010010"
    "32ba7663"

    # client_id
    "0009" "6b61666b612d636c69"

    "00"

    "000001f4"  # max_wait_ms
    "00000001"  # min_bytes
    "03200000"  # max_bytes
    "00"   # isolation_level
    "00000000"  # session_id
    "00000000"  # session_epoch

    "02"  # topics -> size = 1
    "00000000000000000000000000000001"  # .topic_id
        "02"  # .partitions -> size = 1
        "00000000"  # .partition
        "ffffffff"  # .current_leader_epoch
        "0000000000000000"  # .fetch_offset
        "ffffffff"  # .last_fetched_epoch
        "ffffffffffffffff"  # .log_start_offset
        "00100000"  # .partition_max_bytes
        "00"
    "00"

    "01"  # forgotten_topics_data -> empty list
    "01"  # rack_id -> empty string
    "00"
))
