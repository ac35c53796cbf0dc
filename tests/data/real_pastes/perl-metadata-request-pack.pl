# a encoded metadata request hex stream
$encoded = pack( "H*", '0000002d00030000000000000016636f6e736f6c652d636f6e73756d65722d32353535350000000100076d79746f706963' );

# a decoded metadata request
$decoded = {
    CorrelationId => 0,
    ClientId      => 'console-consumer-25555',
};
