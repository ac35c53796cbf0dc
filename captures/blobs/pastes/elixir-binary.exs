    request = <<
      11::16,  # api key
      5::16,  # version
      4::32-signed,  # correlation id
      0, 7, "rdkafka"::binary, 0, 14, "kdissect-group"::binary, 0, 0, 23, 112,
      0, 0, 23, 112, 0, ",rdkafka-154a6f24-1db1-4fe8-ae62-474505aac3d5"::binary, 255, 255, 0, 8,
      "consumer"::binary, 0, 0, 0, 2, 0, 5, "range"::binary, 0, 0,
      0, 30, 0, 3, 0, 0, 0, 1, 0, 8,
      "ck-group"::binary, 0, 0, 0, 0, 0, 0, 0, 0, 255,
      255, 255, 255, 0, 0, 0, 10, "roundrobin"::binary, 0, 0,
      0, 30, 0, 3, 0, 0, 0, 1, 0, 8,
      "ck-group"::binary, 0, 0, 0, 0, 0, 0, 0, 0, 255,
      255, 255, 255, 0, 0
    >>
